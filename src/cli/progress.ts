/** A progress line on stderr: redrawn in place on a terminal, every 10% otherwise (logs, CI). */
export function progressReporter(label: string, stream: NodeJS.WriteStream = process.stderr) {
  let lastDecile = -1;
  const started = Date.now();
  return {
    update(done: number, total: number) {
      const pct = total ? Math.min(100, Math.floor((done / total) * 100)) : 100;
      const width = 30;
      const filled = Math.round((pct / 100) * width);
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      const line = `${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${pct}% ${done}/${total} ${secs}s`;
      if (stream.isTTY) stream.write(`\r${line}`);
      else if (Math.floor(pct / 10) !== lastDecile) {
        lastDecile = Math.floor(pct / 10);
        stream.write(`${line}\n`);
      }
    },
    finish() {
      if (stream.isTTY) stream.write('\n');
    },
  };
}
