import Papa from 'papaparse';
import { Readable } from 'node:stream';
import { ImportFileError } from './errors';

/** Characters held back until the first line is complete, at most (see utf8Text). */
const FIRST_LINE_LIMIT = 1 << 20;

/**
 * The object's bytes as strings, decoded strictly: any invalid UTF-8 sequence (including one cut
 * off at the end) fails the import instead of becoming U+FFFD. TextDecoder drops a leading BOM.
 *
 * The first string handed on contains the whole first line (or 1 MB of text without one):
 * papaparse guesses the line ending (LF or CRLF) from its first chunk only, and a first chunk cut
 * before any newline would make it guess LF for a CRLF file.
 */
export function utf8Text(source: AsyncIterable<Uint8Array>): Readable {
  async function* decode(): AsyncGenerator<string> {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let head: string | undefined = '';
    const text = (bytes?: Uint8Array): string => {
      try {
        return bytes ? decoder.decode(bytes, { stream: true }) : decoder.decode();
      } catch (e) {
        throw new ImportFileError('The file is not UTF-8 text.', { cause: e });
      }
    };
    for await (const bytes of source) {
      let s = text(bytes);
      if (head !== undefined) {
        head += s;
        if (head.indexOf('\n') === -1 && head.length < FIRST_LINE_LIMIT) continue;
        s = head;
        head = undefined;
      }
      if (s.length > 0) yield s;
    }
    const rest = (head ?? '') + text();
    if (rest.length > 0) yield rest;
  }
  // Object mode: strings pass through as they are; a small buffer keeps memory flat.
  return Readable.from(decode(), { objectMode: true, highWaterMark: 4 });
}

/**
 * Feeds `text` through papaparse in chunk mode and calls `onRows` synchronously for each parsed
 * chunk: the rows as arrays of cells, the indexes (in that chunk) of rows papaparse flagged (a
 * malformed quote), and how many characters papaparse holds unparsed (an unfinished row). Whatever
 * `onRows` throws ends the parse with that error. `linebreak` is the line ending papaparse chose.
 * Backpressure is the caller's: pausing `text` stops the chunks, resuming it restarts them.
 *
 * The unparsed count matters: papaparse keeps an unfinished row in memory and parses it again with
 * every chunk, so a quote that is never closed would otherwise pull the rest of a 5 GB file into
 * one string.
 *
 * Blank lines are not filtered here: papaparse's greedy mode would also drop a row of empty cells
 * (`,,`), which is a malformed row, not a blank line.
 */
export function parseCsv(
  text: Readable,
  onRows: (
    rows: string[][],
    flagged: ReadonlySet<number> | undefined,
    unparsed: number,
    linebreak: string,
    /** characters of the text parsed into rows so far */
    parsed: number,
  ) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let failed = false;
    const fail = (e: unknown) => {
      if (failed) return;
      failed = true;
      reject(e);
      text.destroy();
    };
    // papaparse detaches its listeners after the first error; a later one must not go unhandled.
    text.on('error', () => {});
    // Registered before papaparse's listener, so it counts each chunk before papaparse parses it.
    let fed = 0;
    text.on('data', (s: string) => {
      fed += s.length;
    });
    Papa.parse<string[]>(text as unknown as NodeJS.ReadableStream, {
      delimiter: ',',
      header: false,
      dynamicTyping: false,
      skipEmptyLines: false,
      chunk(results) {
        if (failed) return;
        let flagged: Set<number> | undefined;
        for (const e of results.errors) if (e.row !== undefined) (flagged ??= new Set()).add(e.row);
        // meta.cursor is absolute: the end of the last complete row papaparse handed out.
        onRows(results.data, flagged, fed - results.meta.cursor, results.meta.linebreak, results.meta.cursor);
      },
      complete() {
        if (!failed) resolve();
      },
      error(e) {
        fail(e);
      },
    });
  });
}
