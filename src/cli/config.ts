import { maskedConfig } from '../config/mask.ts';
import { parse } from './args.ts';
import { configFrom, DB_FLAGS } from './db.ts';
import { UsageError } from './usage-error.ts';

/** `metarelay config --print`: the config as a process would run with it (file, env, secret files), secrets masked. */
export async function runConfig(argv: string[]) {
  const { values } = parse(argv, { ...DB_FLAGS, print: { type: 'boolean' } });
  if (!values.print) throw new UsageError('usage: metarelay config --print [--config FILE] [--database URL]');
  console.log(JSON.stringify(maskedConfig(configFrom(values)), null, 2));
}
