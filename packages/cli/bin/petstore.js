#!/usr/bin/env node
// The `petstore` command: runs dist/bin.js, the build of src/bin.ts. This file is not built: it exists before the
// build, so that `npm ci` links the command in a clone of the repository (npm links a command only when its file
// exists), and it says what to do when the build has not been run yet.
import('../dist/bin.js').catch((error) => {
  const unbuilt = error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/bin.js');
  process.stderr.write(unbuilt ? 'petstore: @petstore/cli is not built: run npm run build first\n' : `petstore: failed: ${error?.message ?? error}\n`);
  process.exit(1);
});
