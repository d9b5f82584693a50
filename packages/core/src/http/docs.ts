/**
 * The API reference page at `{prefix}/docs` (`docs` option of `createPetstore`): Swagger UI, read from the
 * installed `swagger-ui-dist` package once, at creation, and served by the API itself — no CDN, no network at
 * run time. The page is public and rate limited like the description (`getOpenApiDocument`'s cost per request).
 *
 * Why Swagger UI (docs/reference-page.md, "Why Swagger UI"): its `swagger-ui-dist` package is plain files that
 * run offline, it works under a policy that allows scripts from the page's own origin only (no `'unsafe-eval'`,
 * no inline script: the initializer is a file of its own), and its "Try it out" shows the status and headers of
 * the answer. Scalar's bundle needs `'unsafe-eval'`; Redoc has no "Try it out".
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/reference-page.md
 */
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { errorAnswer, safeMethod } from './answers.js';
import { pathnameOf } from './operations.js';
import type { PetstoreResponse } from './types.js';

/** The `docs` option of `createPetstore` in its object form. */
export interface DocsOptions {
  /** The page's `<title>`. Default: the description's `info.title` followed by ` API reference`. */
  title?: string;
  /**
   * Whether readers may send requests from the page ("Try it out", with the key they enter under "Authorize").
   * Default `true`. With `false` the page only reads.
   */
  tryItOut?: boolean;
}

/** The npm package the page is made of: an optional peer dependency of `@petstore/core`. */
export const DOCS_RENDERER_PACKAGE = 'swagger-ui-dist';

/**
 * The `Content-Security-Policy` of the page (a constant, so hosts can compare theirs). Scripts, styles, images
 * and requests only from the page's own origin; `data:` images for the icons inside Swagger UI's stylesheet;
 * no plugins, frames, forms or `<base>`, and the page may not be framed (clickjacking). No `'unsafe-eval'`
 * and no `'unsafe-inline'`: checked in Chromium by tests/browser.
 */
export const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** One file of the page. */
interface DocsFile {
  contentType: string;
  body: string;
  headers: Readonly<Record<string, string>>;
}

/** The reference page, ready to serve. */
export interface DocsPages {
  /**
   * The answer for a path below the prefix (query string allowed): `undefined` when the path is not the page's
   * (`/docs` or below it); else the file, 404 for an unknown file, or 405 for a method other than GET and HEAD.
   * `headers` are the answer's headers so far (the rate-limit headers), completed in place.
   */
  answer(path: string, method: string, headers: Record<string, string>): PetstoreResponse;
  /** Whether `path` (below the prefix, query string allowed) is the page's: `/docs` or below `/docs/`. */
  owns(path: string): boolean;
}

/** Where the package's files are, found from this module's location as Node resolves a dependency. */
function rendererDirectory(resolveFrom: string): string {
  try {
    return dirname(createRequire(resolveFrom).resolve(`${DOCS_RENDERER_PACKAGE}/package.json`));
  } catch {
    throw new TypeError(
      `createPetstore: docs needs the ${DOCS_RENDERER_PACKAGE} package (the page's scripts and styles), which is not installed: npm install ${DOCS_RENDERER_PACKAGE}`,
    );
  }
}

/** A short content hash, for the cache-busting `?v=` of each asset's address. */
const versionOf = (body: string) => hash('sha256', body, 'base64url').slice(0, 16);

/** A string for a `<script>` file: JSON, with `<` escaped (it cannot end the element or open a comment). */
const scriptValue = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);

const ASSET_CACHE = 'public, max-age=31536000, immutable';

/**
 * Reads the renderer's files and writes the page.
 * @param resolveFrom where `swagger-ui-dist` is looked up from, as a file URL or path (default: this module).
 * @throws TypeError naming the package to install when `swagger-ui-dist` cannot be found.
 */
export function createDocsPages(
  option: true | DocsOptions,
  description: { title: string },
  resolveFrom: string = import.meta.url,
): DocsPages {
  const options = option === true ? {} : option;
  const directory = rendererDirectory(resolveFrom);
  const read = (name: string) => readFileSync(join(directory, name), 'utf8');
  const bundle = read('swagger-ui-bundle.js');
  const stylesheet = read('swagger-ui.css');
  // Addresses relative to the page (`{prefix}/docs`, whose base is `{prefix}/`): the page works wherever the
  // API is mounted, and every request it makes goes to the server that served it.
  const initializer = [
    '// Starts Swagger UI on the description this server serves (a file, not an inline script: see the page\'s Content-Security-Policy).',
    "window.addEventListener('load', function () {",
    '  window.ui = SwaggerUIBundle({',
    "    url: new URL('openapi.json', document.baseURI).href,",
    "    dom_id: '#swagger-ui',",
    '    deepLinking: true,',
    '    showExtensions: true,',
    '    displayRequestDuration: true,',
    '    validatorUrl: null,',
    `    supportedSubmitMethods: ${scriptValue(options.tryItOut === false ? [] : ['get', 'head', 'post'])},`,
    '  });',
    '});',
    '',
  ].join('\n');
  const assets: Record<string, { body: string; contentType: string }> = {
    'swagger-ui.css': { body: stylesheet, contentType: 'text/css; charset=utf-8' },
    'swagger-ui-bundle.js': { body: bundle, contentType: 'text/javascript; charset=utf-8' },
    'initializer.js': { body: initializer, contentType: 'text/javascript; charset=utf-8' },
  };
  const address = (name: string) => `docs/${name}?v=${versionOf((assets[name] as { body: string }).body)}`;
  const title = options.title ?? `${description.title} API reference`;
  const html = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>${escapeHtml(title)}</title>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="${address('swagger-ui.css')}">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="${address('swagger-ui-bundle.js')}"></script>
    <script src="${address('initializer.js')}"></script>
  </body>
</html>
`;

  const files = new Map<string, DocsFile>();
  files.set('/docs', {
    contentType: 'text/html; charset=utf-8',
    body: html,
    headers: {
      'cache-control': 'no-cache',
      'content-security-policy': DOCS_CONTENT_SECURITY_POLICY,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    },
  });
  for (const [name, asset] of Object.entries(assets)) {
    // Each address carries its content's hash, so a file may be kept for a year without going stale.
    files.set(`/docs/${name}`, { ...asset, headers: { 'cache-control': ASSET_CACHE, 'x-content-type-options': 'nosniff' } });
  }

  const owns = (path: string) => {
    const name = pathnameOf(path);
    return name === '/docs' || name.startsWith('/docs/');
  };
  return {
    owns,
    answer(path, method, headers) {
      const file = files.get(pathnameOf(path));
      if (file === undefined) return errorAnswer('not_found', 'There is no file of the reference page at this path.', headers, method);
      const upper = method.toUpperCase();
      if (upper !== 'GET' && upper !== 'HEAD') {
        headers['allow'] = 'GET, HEAD';
        return errorAnswer('method_not_allowed', `The method ${safeMethod(method)} is not allowed here; allowed: GET, HEAD.`, headers, method);
      }
      Object.assign(headers, file.headers);
      headers['content-type'] = file.contentType;
      return { status: 200, headers, body: upper === 'HEAD' ? undefined : file.body };
    },
  };
}
