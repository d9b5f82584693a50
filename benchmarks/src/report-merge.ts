/**
 * `npm run bench -- --only=…` measures some sections only. Its report replaces those sections (and their Budget
 * lines) in the existing BENCHMARKS.md and keeps every other section as it is, byte for byte; each section it
 * wrote carries a note saying when and how it was measured, since the header names the run the rest comes from.
 */

/** The `--only` keys, in the order of the report. */
export const SECTION_KEYS = ['http', 'backends', 'scaleout', 'script', 'algorithms', 'core', 'memory', 'hostile', 'list', 'observability'] as const;
export type SectionKey = (typeof SECTION_KEYS)[number];

/** The heading line of each section. */
export const SECTION_HEADINGS: Record<SectionKey, string> = {
  http: '## HTTP: GET /v1/categories, authenticated, three categories',
  backends: '## Backends: memory, Redis, PostgreSQL',
  scaleout: '## Scale-out: K app processes on one Redis',
  script: '## Redis CPU per decision: the consume script and its pieces',
  algorithms: '## PostgreSQL CPU per decision, by algorithm',
  core: '## Core: rate-limit decisions per second, minute + day windows',
  memory: '## Memory store',
  hostile: '## Hostile bodies: POST /v1/categories, up to 1 MiB',
  list: '## List: 100,000 categories',
  observability: '## Observability',
};

const BUDGET_HEADING = '## Budget';

/** How the Budget lines of each section begin: the lines a section measured again replaces. */
export const BUDGET_PREFIXES: Record<SectionKey, readonly string[]> = {
  http: ['- Fastify adapter', '- Express adapter', '- Redis: '],
  backends: ['- Managed keys', '- Flood', '- PostgreSQL categories', '- Redis categories'],
  scaleout: ['- Redis CPU per request', '- Throughput with K', "- A banned key's"],
  script: ['- `sliding` windows on Redis', '- `gcra` windows on Redis'],
  algorithms: ['- `sliding` windows on PostgreSQL', '- `gcra` windows on PostgreSQL'],
  core: ['- Core '],
  memory: ['- Memory store'],
  hostile: ['- Worst 1 MiB body', '- Every hostile body'],
  list: ['- List: '],
  observability: ['- Observability'],
};

interface Section {
  /** Its heading line. */
  heading: string;
  /** The whole section, heading included, up to the next heading. */
  text: string;
}

/** Splits a report at its `## ` headings; header + every section's text is the report again. */
function parse(report: string): { header: string; sections: Section[] } {
  const starts = [...report.matchAll(/^## .*$/gm)].map((match) => match.index);
  const header = report.slice(0, starts[0] ?? report.length);
  const sections = starts.map((start, index) => {
    const text = report.slice(start, starts[index + 1] ?? report.length);
    return { heading: text.slice(0, text.indexOf('\n') === -1 ? text.length : text.indexOf('\n')), text };
  });
  return { header, sections };
}

const keyOfHeading = (heading: string) => SECTION_KEYS.find((key) => heading === SECTION_HEADINGS[key]);
const keyOfBudgetLine = (line: string) => SECTION_KEYS.find((key) => BUDGET_PREFIXES[key].some((prefix) => line.startsWith(prefix)));
const budgetLines = (sections: Section[]) =>
  sections
    .find((section) => section.heading === BUDGET_HEADING)
    ?.text.split('\n')
    .filter((line) => line.startsWith('- ')) ?? [];

/**
 * The existing report `previous` with the sections of `measured` (and their Budget lines) taken from `fresh`, a
 * report of those sections only; `note` goes under the heading of each section taken. A section new to
 * `previous` goes where the order of {@link SECTION_KEYS} puts it. `warn` hears of Budget lines no section owns.
 */
export function mergeReport(previous: string, fresh: string, measured: ReadonlySet<SectionKey>, note: string, warn: (line: string) => void): string {
  const old = parse(previous);
  const sections = old.sections.filter((section) => section.heading !== BUDGET_HEADING);
  for (const section of parse(fresh).sections) {
    const key = keyOfHeading(section.heading);
    if (key === undefined || !measured.has(key)) continue;
    const lines = section.text.split('\n');
    lines.splice(1, 0, '', note);
    const noted = { heading: section.heading, text: lines.join('\n') };
    const at = sections.findIndex((candidate) => candidate.heading === section.heading);
    if (at !== -1) {
      sections[at] = noted;
      continue;
    }
    // After the last section that comes before it in the report's order, else first.
    const rank = SECTION_KEYS.indexOf(key);
    let after = -1;
    sections.forEach((candidate, index) => {
      const candidateKey = keyOfHeading(candidate.heading);
      if (candidateKey !== undefined && SECTION_KEYS.indexOf(candidateKey) < rank) after = index;
    });
    sections.splice(after + 1, 0, noted);
  }
  const freshBudget = budgetLines(parse(fresh).sections);
  const oldBudget = budgetLines(old.sections);
  for (const line of freshBudget) if (keyOfBudgetLine(line) === undefined) warn(`no section owns the Budget line "${line}" (BUDGET_PREFIXES)`);
  const budget = [
    ...SECTION_KEYS.flatMap((key) => (measured.has(key) ? freshBudget : oldBudget).filter((line) => keyOfBudgetLine(line) === key)),
    ...oldBudget.filter((line) => keyOfBudgetLine(line) === undefined),
    ...freshBudget.filter((line) => keyOfBudgetLine(line) === undefined),
  ];
  return `${old.header}${sections.map((section) => section.text).join('')}${BUDGET_HEADING}\n\n${budget.map((line) => `${line}\n`).join('')}`;
}
