// node-postgres (pg 8) against an Eddy server: a table and a materialized view (GROUP BY
// aggregate, and a filtering one), inserts with text parameters through the unnamed extended protocol, named
// prepared statements, simple queries, and type checks on the values read back.
//
// Usage: node node_pg.js HOST PORT   (after `npm ci` in this directory)
// Prints "node-postgres ok"; exits 3 when the `pg` module is not installed, 1 on a failed check.

'use strict';

let pg;
try {
  pg = require('pg');
} catch (e) {
  console.log('missing node module pg (run npm ci in e2e_test/clients/node)');
  process.exit(3);
}
const assert = require('assert');

// Decode int8 and numeric ourselves so the checks see exact values.
pg.types.setTypeParser(20, (v) => BigInt(v));

async function main() {
  const [host, port] = process.argv.slice(2);
  const client = new pg.Client({ host, port: Number(port), user: 'root', database: 'dev' });
  await client.connect();

  await client.query('CREATE TABLE nt (id INT PRIMARY KEY, name TEXT NOT NULL, amount NUMERIC(10,2), ok BOOLEAN, ts TIMESTAMPTZ)');
  await client.query('CREATE MATERIALIZED VIEW nt_v AS SELECT id, name FROM nt WHERE ok');
  await client.query('CREATE MATERIALIZED VIEW nt_mv AS SELECT name, count(*) AS n, sum(amount) AS total FROM nt GROUP BY name');

  const ts = new Date(Date.UTC(2024, 0, 2, 3, 4, 5));
  const rows = [
    [1, 'alpha', '12.50', true, ts],
    [2, 'alpha', '1.25', false, ts],
    [3, 'beta', '0.10', true, ts],
  ];
  for (const r of rows) {
    const res = await client.query('INSERT INTO nt VALUES ($1, $2, $3, $4, $5)', r);
    assert.strictEqual(res.rowCount, 1);
  }

  // Unnamed extended protocol with a parameter.
  let res = await client.query('SELECT id, name, amount, ok, ts FROM nt WHERE id = $1', [1]);
  assert.strictEqual(res.rows.length, 1);
  const row = res.rows[0];
  assert.strictEqual(row.id, 1);
  assert.strictEqual(row.name, 'alpha');
  assert.strictEqual(row.amount, '12.50'); // numeric arrives as an exact string
  assert.strictEqual(row.ok, true);
  assert.ok(row.ts instanceof Date && row.ts.getTime() === ts.getTime(), String(row.ts));
  assert.deepStrictEqual(res.fields.map((f) => f.dataTypeID), [23, 25, 1700, 16, 1184]);

  // A named prepared statement, executed twice.
  for (const id of [1, 3]) {
    res = await client.query({ name: 'by_id', text: 'SELECT name FROM nt_v WHERE id = $1', values: [id] });
    assert.deepStrictEqual(res.rows, [{ name: id === 1 ? 'alpha' : 'beta' }]);
  }

  // The materialized view: simple protocol, then extended with a parameter.
  res = await client.query('SELECT name, n, total FROM nt_mv ORDER BY name');
  assert.deepStrictEqual(res.rows, [
    { name: 'alpha', n: 2n, total: '13.75' },
    { name: 'beta', n: 1n, total: '0.10' },
  ]);
  assert.deepStrictEqual(res.fields.map((f) => f.dataTypeID), [25, 20, 1700]);
  res = await client.query('SELECT total FROM nt_mv WHERE name = $1', ['beta']);
  assert.deepStrictEqual(res.rows, [{ total: '0.10' }]);

  res = await client.query("SELECT relname, relkind FROM pg_class WHERE relname LIKE 'nt%' ORDER BY relname");
  assert.deepStrictEqual(res.rows.map((r) => r.relname + ':' + r.relkind), ['nt:r', 'nt_mv:m', 'nt_pkey:i', 'nt_v:m']);

  // Errors carry SQLSTATEs and leave the connection usable.
  await assert.rejects(client.query('SELECT * FROM missing_table'), (e) => e.code === '42P01');
  res = await client.query('SELECT 1 AS one');
  assert.deepStrictEqual(res.rows, [{ one: 1 }]);

  await client.end();
  console.log('node-postgres ok');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
