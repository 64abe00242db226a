import { loadConfig } from '../config';
import { connect } from '../db';
import { migrate } from '../migrate';
import { resolveDatabaseUrl } from '../embedded/urls';

const config = loadConfig();
const { url, stop } = await resolveDatabaseUrl(config);
const sql = connect(url, 2);
try {
  const applied = await migrate(sql, (m) => console.error(m));
  console.log(JSON.stringify({ applied }));
} finally {
  await sql.end();
  await stop();
}
