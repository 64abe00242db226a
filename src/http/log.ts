type Level = 'debug' | 'info' | 'warn' | 'error';
const RANK: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };
let threshold = RANK.info;

/** Entry points call this once with config.logLevel. */
export function setLogLevel(level: Level): void {
  threshold = RANK[level];
}

/** One structured JSON line per event: info and below on stdout, warn and error on stderr. Never a key, never an email. */
export function log(level: Level, msg: string, fields: Record<string, unknown> = {}): void {
  if (RANK[level] < threshold) return;
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields });
  if (level === 'error' || level === 'warn') console.error(line);
  else console.log(line);
}

export function errorFields(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { error: error.message, stack: error.stack?.split('\n').slice(0, 6).join('\n') };
  return { error: String(error) };
}
