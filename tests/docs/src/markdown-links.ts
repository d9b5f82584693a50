/**
 * Links and anchors of Markdown files as GitHub renders them. The Markdown is parsed by `marked` (GitHub
 * Flavored Markdown, its default), a heading's anchor is GitHub's slug of its text (`github-slugger`, with its
 * `-1`, `-2` … for repeated headings), and HTML in the Markdown (`<a id="…">`, `<a href="…">`) is read with
 * `parse5`. Used by this workspace's test (every Markdown file of the repository) and by the installed-package
 * tests (the Markdown inside each packed tarball).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import GithubSlugger from 'github-slugger';
import { Marked, type Tokens } from 'marked';
import { defaultTreeAdapter, parseFragment, type DefaultTreeAdapterMap } from 'parse5';

/** A link or image in a Markdown file. */
export interface MarkdownLink {
  /** 1-based line of the link in its file (the first line where its Markdown source appears). */
  line: number;
  /** The link's target as written (`docs/http-api.md#rate-limits`, `#configuration`, `https://…`). */
  href: string;
}

/** What the link check needs of one Markdown file. */
export interface MarkdownDocument {
  links: MarkdownLink[];
  /** Every fragment that lands somewhere in the file: its headings' slugs and its HTML `id`/`name` attributes. */
  anchors: Set<string>;
}

// A private instance: no extension registered elsewhere changes how these files are read.
const markdown = new Marked({ gfm: true });

/** Parses `text` (a Markdown file's content) into its links and anchors. */
export function readMarkdown(text: string): MarkdownDocument {
  const tokens = markdown.lexer(text);
  const links: MarkdownLink[] = [];
  const anchors = new Set<string>();
  const slugger = new GithubSlugger();
  let searchFrom = 0;
  const lineOf = (raw: string): number => {
    // Tokens come in document order: look after the previous link first, so a repeated link gets its own line.
    let index = text.indexOf(raw, searchFrom);
    if (index === -1) index = text.indexOf(raw);
    else searchFrom = index + raw.length;
    return index === -1 ? 0 : text.slice(0, index).split('\n').length;
  };
  markdown.walkTokens(tokens, (token) => {
    switch (token.type) {
      case 'heading': {
        // GitHub's anchor: the slug of the heading's text as rendered (markup and tags gone, entities decoded).
        anchors.add(slugger.slug(textContent(markdown.parser([token as Tokens.Heading]))));
        break;
      }
      case 'link':
      case 'image': {
        const { href, raw } = token as Tokens.Link | Tokens.Image;
        links.push({ line: lineOf(raw), href });
        break;
      }
      case 'html': {
        const { raw } = token as Tokens.HTML;
        for (const element of elements(parseFragment(raw))) {
          const tag = defaultTreeAdapter.getTagName(element);
          for (const { name, value } of defaultTreeAdapter.getAttrList(element)) {
            if (name === 'id' || (name === 'name' && tag === 'a')) anchors.add(value);
            if ((name === 'href' && tag === 'a') || (name === 'src' && tag === 'img')) links.push({ line: lineOf(raw), href: value });
          }
        }
        break;
      }
    }
  });
  return { links, anchors };
}

/** A target with a scheme (`https:`, `mailto:`) or a network path (`//host/…`): not a file of ours. */
export function isAbsoluteUrl(href: string): boolean {
  return /^[a-z][a-z\d+.-]*:/i.test(href) || href.startsWith('//');
}

/** A line or range of a source file, as GitHub's file view names it (`#L12`, `#L12-L20`). */
const SOURCE_LINE = /^L\d+(?:-L\d+)?$/;

export interface LinkCheckOptions {
  /**
   * Files may link only inside this folder (a packed package, whose README is read on the registry without
   * the rest of the repository). A link leaving it is reported even when the file exists.
   */
  within: string;
}

/**
 * Every relative link and `#anchor` of the Markdown file `file` that does not resolve: the target file (or
 * folder) must exist inside `options.within`, and a fragment must name an anchor of the target (for a Markdown
 * target; a line `#L12` of another file is accepted). Absolute URLs are not followed. Answers one line per
 * problem, `README.md:12: docs/x.md#y: no such anchor in docs/x.md`, relative to `options.within`.
 */
export function brokenLinks(file: string, options: LinkCheckOptions): string[] {
  const root = resolve(options.within);
  const documents = new Map<string, MarkdownDocument>();
  const documentOf = (path: string): MarkdownDocument => {
    let document = documents.get(path);
    if (document === undefined) {
      document = readMarkdown(readFileSync(path, 'utf8'));
      documents.set(path, document);
    }
    return document;
  };
  const source = resolve(file);
  const name = relative(root, source);
  const problems: string[] = [];
  for (const { line, href } of documentOf(source).links) {
    if (isAbsoluteUrl(href)) continue;
    const report = (problem: string) => problems.push(`${name}:${line}: ${href}: ${problem}`);
    const hashAt = href.indexOf('#');
    const pathPart = hashAt === -1 ? href : href.slice(0, hashAt);
    const fragment = hashAt === -1 ? undefined : decode(href.slice(hashAt + 1));
    let target = source;
    if (pathPart !== '') {
      const decoded = decode(pathPart.split('?')[0] ?? '');
      // A path starting with `/` is relative to the repository's root on GitHub.
      target = decoded.startsWith('/') ? join(root, decoded) : resolve(dirname(source), decoded);
      const inside = relative(root, target);
      if (inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside)) {
        report(`the target ${inside} is outside the folder checked`);
        continue;
      }
      if (!existsSync(target)) {
        report(`no such file: ${inside}`);
        continue;
      }
    }
    if (fragment === undefined || fragment === '') continue;
    if (statSync(target).isDirectory()) {
      report(`a fragment on a folder`);
    } else if (/\.md$/i.test(target)) {
      if (!documentOf(target).anchors.has(fragment)) report(`no anchor #${fragment} in ${relative(root, target)}`);
    } else if (!SOURCE_LINE.test(fragment)) {
      report(`#${fragment} is neither a Markdown anchor nor a line (#L12) of ${relative(root, target)}`);
    }
  }
  return problems;
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

type ParentNode = DefaultTreeAdapterMap['parentNode'];
type Element = DefaultTreeAdapterMap['element'];

/** Every element of a parse5 tree, depth first. */
function* elements(node: ParentNode): Generator<Element> {
  for (const child of defaultTreeAdapter.getChildNodes(node)) {
    if (defaultTreeAdapter.isElementNode(child)) {
      yield child;
      yield* elements(child);
    }
  }
}

/** The text of rendered HTML, as a browser's `textContent` gives it. */
function textContent(html: string): string {
  const collect = (node: ParentNode): string =>
    defaultTreeAdapter
      .getChildNodes(node)
      .map((child) => (defaultTreeAdapter.isTextNode(child) ? defaultTreeAdapter.getTextNodeContent(child) : defaultTreeAdapter.isElementNode(child) ? collect(child) : ''))
      .join('');
  return collect(parseFragment(html));
}
