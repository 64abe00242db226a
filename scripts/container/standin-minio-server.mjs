// `minio server DIR [--address :PORT]` on s3rver (the stand-in's /usr/local/bin/minio runs this):
// objects under DIR, on PORT (9000), the one key pair MINIO_ROOT_USER / MINIO_ROOT_PASSWORD (s3rver's
// own S3RVER pair is revoked). Path-style only: s3rver would read a host name such as `s3` as a bucket.
import process from 'node:process';
import S3rver from 's3rver';
import AWSAccount from 's3rver/lib/models/account.js';

const say = (line) => process.stderr.write(`${line}\n`);
const [command, directory, ...flags] = process.argv.slice(2);
if (command !== 'server' || !directory) {
  say('usage: minio server DIR [--address :PORT]');
  process.exit(2);
}
const at = flags.indexOf('--address');
const port = at >= 0 ? Number(flags[at + 1].split(':').pop()) : 9000;
const user = process.env.MINIO_ROOT_USER;
const password = process.env.MINIO_ROOT_PASSWORD;
if (!user || !password) {
  say('MINIO_ROOT_USER and MINIO_ROOT_PASSWORD must be set');
  process.exit(2);
}
AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
AWSAccount.DUMMY_ACCOUNT.createKeyPair(user, password);

const server = new S3rver({ address: '0.0.0.0', port, directory, vhostBuckets: false, silent: true });
try {
  await server.run();
  say(`standin minio (s3rver): serving ${directory} on :${port}`);
} catch (e) {
  say(String(e?.stack ?? e));
  process.exit(1);
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close().then(() => process.exit(0)));
