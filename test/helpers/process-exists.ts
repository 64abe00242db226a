/**
 * Whether a process with this pid exists, a zombie included: a killed child counts until its parent
 * has reaped it, by when its sockets are closed (src/embedded's pidAlive counts a zombie gone).
 */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
