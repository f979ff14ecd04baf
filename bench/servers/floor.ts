/**
 * The floor: a bare node:http server that answers 204 to everything and does nothing
 * else. What HTTP on Node costs on this machine, so rill's figures can be read against it.
 * Usage: node floor.js PORT
 */
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
const server = createServer({ keepAliveTimeout: 5_000 }, (_req, res) => {
  res.writeHead(204);
  res.end();
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
