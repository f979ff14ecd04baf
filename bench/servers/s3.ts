/**
 * The cold tier's object store for the bench: s3rver (the devDependency the cold tier's
 * tests use, test/helpers/s3.ts) on 127.0.0.1, in a process of its own so that its CPU
 * time is neither the load generator's nor rill's, with one bucket, storing objects in
 * DIR. Its credentials are s3rver's defaults (bench/s3.ts passes them to rill).
 * Usage: node s3.js PORT DIR BUCKET
 */
import S3rver from 's3rver';

const [port, directory, bucket] = process.argv.slice(2);
const server = new S3rver({ address: '127.0.0.1', port: Number(port), silent: true, directory: directory!, configureBuckets: [{ name: bucket!, configs: [] }] });
await server.run();

// SIGTERM from the bench: close the listener so the port is free at once, then exit.
process.once('SIGTERM', () => {
  void server.close().finally(() => process.exit(0));
});
