import { packageBuild } from '../../tsup.config.base';

// shims: the CommonJS build gets `import.meta.url` (the reference page finds swagger-ui-dist from it, http/docs.ts).
export default packageBuild({ index: 'src/index.ts', node: 'src/node.ts', testing: 'src/testing/index.ts' }, { shims: true });
