// The contract suite runs Express 4 beside Express 5: `express4` is npm:express@4 (package.json). Its API, as
// far as the suite uses it (express(), json(), use, get, post, listen), has the same types as Express 5's.
declare module 'express4' {
  import express from 'express';
  export default express;
}
