import { packageBuild } from '../../tsup.config.base';

export default packageBuild({ index: 'src/index.ts', node: 'src/node.ts', testing: 'src/testing/index.ts' });
