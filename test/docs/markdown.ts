/**
 * How the docs tests read Markdown: the runnable blocks of a document, the commands of a
 * shell block with what each one states, and the guides the README lists.
 */

export interface Block {
  lang: 'sh' | 'ts';
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
}

/** The runnable blocks of a Markdown text, in order. */
export function runnableBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    if (end < 0) throw new Error(`line ${i + 1}: unclosed code block`);
    const lang = open[1];
    if (lang === 'sh' || lang === 'ts') blocks.push({ lang, code: lines.slice(i + 1, end).join('\n'), line: i + 1 });
    i = end;
  }
  return blocks;
}

export interface Command {
  text: string;
  line: number;
  /** What the comment after `→` states. */
  status?: number;
  exit?: number;
  output?: string;
  untilCtrlC: boolean;
}

/** Splits a shell block into commands (continued lines joined), each with what it states. */
export function shellCommands(block: Block): Command[] {
  const commands: Command[] = [];
  const lines = block.code.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (/^\s*(#.*)?$/.test(lines[i]!)) continue;
    const start = i;
    let text = lines[i]!;
    while (/\\\s*$/.test(lines[i]!) && i + 1 < lines.length) text += `\n${lines[++i]}`;
    const comment = /\s#\s(.*)$/.exec(lines[i]!)?.[1] ?? '';
    commands.push({ text, line: block.line + 1 + start, untilCtrlC: comment.includes('Ctrl-C'), ...stated(comment) });
  }
  return commands;
}

function stated(comment: string): Pick<Command, 'status' | 'exit' | 'output'> {
  const claim = /→\s*(.*)$/.exec(comment)?.[1]?.trim();
  if (claim === undefined) return {};
  const match = /^(?:(\d{3})\b|exit (\d+)\b)?\s*(.*)$/.exec(claim)!;
  return {
    ...(match[1] ? { status: Number(match[1]) } : {}),
    ...(match[2] ? { exit: Number(match[2]) } : {}),
    ...(match[3] ? { output: match[3] } : {}),
  };
}

/**
 * The guides, in the order the README's `## Guides` section links them (paths from the
 * repository's root).
 */
export function guides(readme: string): string[] {
  const section = /^## Guides\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(readme)?.[1] ?? '';
  const items = section.split('\n').filter((line) => line.startsWith('- '));
  return [...new Set(items.map((item) => /\]\((docs\/[^)#]+\.md)\)/.exec(item)?.[1]).filter((p): p is string => p !== undefined))];
}

/** The `// → text` lines a TypeScript block says it prints, in order. */
export function statedPrints(block: Block): string[] {
  return block.code
    .split('\n')
    .map((l) => /\/\/\s*→\s*(.*)$/.exec(l)?.[1]?.trim())
    .filter((s): s is string => s !== undefined && s !== '');
}


/** A command of a ```console block, with the lines the document shows as its output. */
export interface ConsoleCommand extends Command {
  shown: string[];
}

export interface ConsoleBlock {
  /** 1-based line of the opening fence. */
  line: number;
  commands: ConsoleCommand[];
}

/**
 * The ```console blocks of a Markdown text: each `$ ` line a command (its `\`-continued
 * lines joined), each other line the output shown for the command before it, except lines
 * starting with `#` (commentary).
 */
export function consoleBlocks(markdown: string): ConsoleBlock[] {
  const blocks: ConsoleBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^```console\s*$/.test(lines[i]!)) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    if (end < 0) throw new Error(`line ${i + 1}: unclosed code block`);
    const block: ConsoleBlock = { line: i + 1, commands: [] };
    for (let j = i + 1; j < end; j++) {
      const line = lines[j]!;
      if (line.startsWith('$ ')) {
        const start = j;
        let text = line.slice(2);
        while (/\\\s*$/.test(lines[j]!) && j + 1 < end) text += `\n${lines[++j]}`;
        const comment = /\s#\s(.*)$/.exec(lines[j]!)?.[1] ?? '';
        const [stated] = shellCommands({ lang: 'sh', code: `x # ${comment}`, line: 0 });
        block.commands.push({ ...stated!, text, line: start + 1, untilCtrlC: comment.includes('Ctrl-C'), shown: [] });
      } else if (line.trim() !== '' && !line.startsWith('#')) {
        const last = block.commands.at(-1);
        if (!last) throw new Error(`line ${j + 1}: a console block starts with output, not a $ command`);
        last.shown.push(line);
      }
    }
    blocks.push(block);
    i = end;
  }
  return blocks;
}
