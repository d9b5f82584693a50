/**
 * The example host's own pets and store-order operations. The spec shows only that these operations exist
 * (docs/http-api.md, "Host operations"), so the host supplies them; the library wraps them with auth, rate limits, headers, errors,
 * deprecation and their entries in the OpenAPI description.
 */
import { PetstoreError, type HostOperationHandler, type HostOperationId } from '@petstore/core';

const PETS = new Map<number, { id: number; name: string; categoryId: number }>([
  [1, { id: 1, name: 'Rex', categoryId: 1 }],
  [2, { id: 2, name: 'Tom', categoryId: 2 }],
]);

const ORDERS = [{ id: 1, petId: 2, status: 'placed' }];

/** Handlers for `getPetById` (deprecated) and `listStoreOrders` (beta). */
export const exampleHandlers: Record<HostOperationId, HostOperationHandler> = {
  getPetById: ({ params }) => {
    const pet = PETS.get(Number(params['petId']));
    if (pet === undefined) throw new PetstoreError('not_found', 'There is no pet with this id.');
    return { body: pet };
  },
  listStoreOrders: () => ({ body: ORDERS }),
};
