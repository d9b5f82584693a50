import { readFileSync } from 'node:fs';
import { packageBuild } from '../../tsup.config.base';

const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };

// `bin` is the `petstore` command (run by bin/petstore.js); its declarations are not needed: the
// package's types are those of `index`. `--version` prints the version of package.json.
export default packageBuild(
  { index: 'src/index.ts', bin: 'src/bin.ts' },
  { dts: { entry: { index: '../../.types/cli/src/index.d.ts' } }, define: { __CLI_VERSION__: JSON.stringify(version) } },
);
