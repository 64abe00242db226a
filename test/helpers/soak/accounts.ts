/** The soak's accounts: an account, a full-scope key and the attributes its files and client use. */
import type { Sql } from '../../../src/db';
import { createAccount, createAttribute, createKey } from '../fixtures';

export interface SoakAccount {
  index: number;
  id: string;
  key: string;
}

export async function soakAccount(sql: Sql, index: number, name: string): Promise<SoakAccount> {
  const id = await createAccount(sql, name);
  for (const [attr, type] of [
    ['n', 'number'],
    ['name', 'string'],
    ['tier', 'string'],
  ] as const)
    await createAttribute(sql, id, attr, type);
  return { index, id, key: await createKey(sql, id) };
}
