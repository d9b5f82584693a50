/**
 * The public surface of every entry point, name by name: run-time exports (`values`, the same for `import` and
 * `require`) and type-only exports (`types`). The installed-package tests compare the packed packages with
 * this list, so adding or dropping an export is a change to this file that shows in review.
 */
export const EXPECTED_EXPORTS: Record<string, { values: string[]; types: string[] }> = {
  '@petstore/core': {
    values: ['API_DESCRIPTION_VERSION','API_KEY_HASH_BYTES','CATEGORY_DESCRIPTION_MAX_CODE_POINTS','CATEGORY_DESCRIPTION_MAX_LENGTH','CATEGORY_NAME_MAX_CODE_POINTS','CATEGORY_NAME_MAX_LENGTH','CategorySchema','DAY_MS','DEFAULT_ANONYMOUS_LIMITS','DEFAULT_BAN_POLICY','DEFAULT_BODY_LIMIT_BYTES','DEFAULT_CATEGORY_PAGE_LIMIT','DEFAULT_DEPRECATIONS','DEFAULT_IDEMPOTENCY_RETENTION_MS','DEFAULT_IPV6_SUBNET','DEFAULT_MANAGED_KEYS_CACHE','DEFAULT_MANAGED_KEY_PREFIX','DEFAULT_PLAN_LIMITS','DEFAULT_ROTATION_GRACE_MS','DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS','DOCS_CONTENT_SECURITY_POLICY','DOCS_RENDERER_PACKAGE','ERROR_CODES','ERROR_STATUS','ErrorBodySchema','MAX_API_KEY_LENGTH','MAX_CATEGORY_PAGE_LIMIT','MAX_IDEMPOTENCY_KEY_LENGTH','MAX_LIMIT_TIMES_WINDOW_MS','MINUTE_MS','NewCategorySchema','OPENAPI_VERSION','PETSTORE_API_KEY_WATCH_CHANNEL','PETSTORE_REQUEST_CHANNEL','PETSTORE_STORE_CHANNEL','PLAN_NAMES','PetstoreError','RATE_LIMIT_ALGORITHMS','UNKNOWN_CLIENT_ADDRESS','apiKeyHashesEqual','buildOpenApiDocument','createPetstore','createRateLimiter','decideConsume','errorBody','hashApiKey','isPetstoreError','isPlanName','isWellFormedManagedKey','managedApiKeys','managedKeyPattern','mergeOpenApiDocument','parseNewCategory','peekState','rateLimitHeaders','retryAfterSeconds','standardRateLimitHeaders','staticApiKeys','systemClock','windowStartMs','windowUsage'],
    types: ['AnonymousRequest','ApiKeyInfo','ApiKeyRecord','ApiKeyRecordChange','ApiKeyRecordStore','ApiKeyRecordWatcher','ApiKeyRefusalReason','ApiKeyStatus','ApiKeyStore','ApiKeyWatchState','AuthFailureReason','BanPolicy','BanState','BodyReadResult','Category','CategoryPage','CategoryStore','Clock','ConsumeDecision','ConsumeOptions','ConsumeRequest','ConsumeResult','CostName','DeprecationPolicy','DocsOptions','ErrorBody','ErrorCode','FetchInfo','FindPrincipalContext','GuardOptions','GuardRequest','GuardResult','HostOperationContext','HostOperationHandler','HostOperationId','HostOperationResult','IdempotentCreateRequest','IdempotentCreateResult','IssueApiKeyOptions','IssuedApiKey','ListApiKeysOptions','ManagedApiKeys','ManagedApiKeysOptions','MergeOpenApiOptions','NewCategory','NewCategoryParseResult','OpenApiDocument','OpenApiOperationInfo','OpenApiOptions','OpenApiRateLimitPolicy','OpenApiRateLimits','OperationId','Petstore','PetstoreApiKeyWatchMessage','PetstoreEvent','PetstoreEventType','PetstoreHeaders','PetstoreLogger','PetstoreOptions','PetstoreRateLimitOptions','PetstoreRateLimitSubject','PetstoreRateLimits','PetstoreRequest','PetstoreRequestBody','PetstoreRequestContext','PetstoreResponse','PetstoreStoreContext','PetstoreWarning','PetstoreWarningCode','PlanLimits','PlanName','PlanPolicy','Principal','RateLimitAlgorithm','RateLimitDecision','RateLimitOutcome','RateLimitOwner','RateLimitPeek','RateLimitSnapshot','RateLimitState','RateLimitStore','RateLimitSubject','RateLimitWindow','RateLimiter','RateLimiterOptions','RotateApiKeyOptions','Stability','StaticApiKey','StoreBackend','StoreFailurePolicy','StoreOperation','UpdateApiKeyOptions','WindowCounter','WindowUsage'],
  },
  '@petstore/core/node': {
    values: ['DEFAULT_PREFIX','guardOptionsOf','nodeHeadersCutOff','nodePetstoreRequest','nodeRequestBody','nodeRequestHasBody','nodeRequestHeaders','nodeRequestPath','originFormTarget','pathBelowPrefix','petstoreCheckExpectation','petstoreNodeHandler','writeNodeResponse'],
    types: ['NodeHandlerOptions','NodeRequestOptions'],
  },
  '@petstore/core/testing': {
    values: ['fakeClock','runApiKeyRecordStoreConformance','runCategoryStoreConformance','runRateLimitModelComparison','runRateLimitStoreConformance','testClient'],
    types: ['ApiKeyRecordStoreConformanceOptions','ApiKeyRecordStoreHarness','CategoryStoreConformanceOptions','CategoryStoreHarness','ConformanceTestApi','FakeClock','RateLimitModelComparisonOptions','RateLimitModelHarness','RateLimitStoreConformanceOptions','RateLimitStoreHarness','TestAnswer','TestClient','TestClientOptions'],
  },
  '@petstore/storage-memory': {
    values: ['DEFAULT_MAX_API_KEY_RECORDS','DEFAULT_MAX_CATEGORIES','DEFAULT_MAX_IDEMPOTENCY_KEYS','DEFAULT_MAX_KEYS','memoryApiKeyRecordStore','memoryCategoryStore','memoryRateLimitStore'],
    types: ['MemoryApiKeyRecordStore','MemoryApiKeyRecordStoreOptions','MemoryCategoryStore','MemoryCategoryStoreOptions','MemoryRateLimitStore','MemoryRateLimitStoreOptions'],
  },
  '@petstore/storage-redis': {
    values: ['CONSUME_COMMAND','CREATE_CATEGORY_COMMAND','DEFAULT_BLOCK_CACHE_MAX_AGE_MS','DEFAULT_BLOCK_CACHE_MAX_KEYS','DEFAULT_CALL_TIMEOUT_MS','DEFAULT_KEY_PREFIX','NotARecordError','PEEK_COMMAND','RedisTimeoutError','apiKeyRedisKeys','categoryRedisKeys','rateLimitRedisKey','redisApiKeyRecordStore','redisCategoryStore','redisRateLimitStore'],
    types: ['RedisApiKeyRecordStore','RedisApiKeyRecordStoreOptions','RedisCategoryStore','RedisCategoryStoreOptions','RedisRateLimitStore','RedisRateLimitStoreOptions'],
  },
  '@petstore/storage-redis/testing': {
    values: ['isRedisCliInstalled','isRedisServerInstalled','resolveTestRedis','resolveTestRedisCluster','startRedisCluster','startRedisServer'],
    types: ['RedisCluster','RedisClusterNode','RedisClusterOptions','RedisServer','RedisServerOptions','TestRedis','TestRedisCluster','TestRedisSkip'],
  },
  '@petstore/storage-postgres': {
    values: ['DEFAULT_API_KEYS_TABLE','DEFAULT_CALL_TIMEOUT_MS','DEFAULT_CATEGORIES_TABLE','DEFAULT_RATE_LIMITS_TABLE','DEFAULT_SCHEMA','LISTEN_HEARTBEAT_INTERVAL_MS','LISTEN_RECONNECT_INITIAL_DELAY_MS','LISTEN_RECONNECT_MAX_DELAY_MS','MAX_CONSUMES_PER_STATEMENT','MIGRATIONS_TABLE','PostgresTimeoutError','migratePostgres','postgresApiKeyRecordStore','postgresApiKeysChannel','postgresCategoryStore','postgresMigrations','postgresRateLimitStore'],
    types: ['MigratePostgresOptions','MigrationReport','PostgresApiKeyRecordStore','PostgresApiKeyRecordStoreOptions','PostgresCategoryStore','PostgresCategoryStoreOptions','PostgresMigration','PostgresRateLimitStoreOptions','PostgresSchemaOptions'],
  },
  '@petstore/storage-postgres/testing': {
    values: ['findPostgresBinDir','resolveTestPostgres','startPostgresServer'],
    types: ['PostgresServer','PostgresServerOptions','TestPostgres','TestPostgresSkip'],
  },
  '@petstore/adapter-fastify': {
    values: ['default','petstoreFastify','petstoreFrameworkErrors','petstoreGuard','principalOf'],
    types: ['PetstoreFastifyOptions'],
  },
  '@petstore/adapter-express': {
    values: ['default','petstoreExpress','petstoreGuard','principalOf'],
    types: ['PetstoreExpressHandlers','PetstoreExpressOptions'],
  },
  '@petstore/cli': {
    values: ['DEPLOYMENT_REDIS_KEY','DEPLOYMENT_TABLE','EXIT_CODES','recordDeployment','runCli'],
    types: ['CliIo','DeploymentStore','DeploymentStores','ExitCode','PetstoreDeployment'],
  },
  '@petstore/opentelemetry': {
    values: ['HTTP_SERVER_DURATION_BUCKETS_SECONDS','INSTRUMENTATION_NAME','STORE_OPERATION_DURATION_BUCKETS_SECONDS','instrumentPetstore'],
    types: ['InstrumentPetstoreOptions','PetstoreTelemetry'],
  },
  '@petstore/client': {
    values: ['DEFAULT_ATTEMPT_TIMEOUT_MS','DEFAULT_PAGE_LIMIT','DEFAULT_RETRY','PetstoreClientError','backoffDelayMs','createPetstoreClient','isPetstoreClientError','parseRetryAfter','readRateLimitInfo'],
    types: ['Category','ErrorBody','ErrorCode','NewCategory','PetstoreCallOptions','PetstoreClient','PetstoreClientErrorCode','PetstoreClientErrorDetails','PetstoreClientOptions','PetstoreCreateOptions','PetstoreFetch','PetstoreFetchHeaders','PetstoreFetchInit','PetstoreFetchResponse','PetstoreListOptions','PetstorePagesOptions','RateLimitInfo','ResolvedRetryOptions','RetryOptions'],
  },
};
