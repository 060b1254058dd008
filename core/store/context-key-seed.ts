/**
 * A store's seed for its contexts' keys (core/store/context-key.ts): 32 random bits made with the
 * store (schema.ts applyMigrations) and kept in its meta table, so that no client can make ids that
 * share a key in a store it cannot read. Everything that writes or looks up a key reads it here.
 */
import type Database from 'better-sqlite3';
import { CONTEXT_KEY_SEED_META, StoreError } from './schema';

const MAX_SEED = 0xffffffff;

/**
 * The seed of an open store (an unsigned 32-bit integer). A v11 store made before stores had seeds
 * has none: its rows were keyed with seed 0, so it reads as 0 and no lookup misses one of them.
 */
export function readContextKeySeed(db: Database.Database): number {
  const value = db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(CONTEXT_KEY_SEED_META) as
    string | undefined;
  if (value === undefined) return 0;
  const seed = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  // a seed misread would miss every row keyed with the real one: refused, never guessed
  if (!(seed <= MAX_SEED))
    throw new StoreError(
      'E_STORE_CORRUPT',
      `${db.name}: its ${CONTEXT_KEY_SEED_META} is '${value}', not a 32-bit seed`,
      db.name,
    );
  return seed;
}
