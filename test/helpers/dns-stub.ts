import { createSocket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';

export interface DnsStub {
  /** A real resolver asking only this server: what the code under test is given in place of the system's. */
  resolve(host: string): Promise<string[]>;
  /** The A questions asked so far, by name. */
  asked: string[];
  close(): Promise<void>;
}

/**
 * A DNS server on 127.0.0.1 (UDP, a random port) that answers the n-th A question with `answers[n]`,
 * the last one from then on, with a TTL of 0; any other question gets an empty answer. Enough of
 * RFC 1035 for one question per message, as resolvers send.
 */
export async function dnsStub(answers: string[]): Promise<DnsStub> {
  const asked: string[] = [];
  const socket = createSocket('udp4');
  socket.on('message', (query, from) => {
    let at = 12;
    const labels: string[] = [];
    while (query[at]! !== 0) {
      const length = query[at]!;
      labels.push(query.subarray(at + 1, at + 1 + length).toString('latin1'));
      at += length + 1;
    }
    const type = query.readUInt16BE(at + 1);
    const questionEnd = at + 5;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // the question's id
    header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, no error
    header.writeUInt16BE(1, 4); // one question
    const parts = [header, query.subarray(12, questionEnd)];
    if (type === 1) {
      const address = answers[Math.min(asked.length, answers.length - 1)]!;
      asked.push(labels.join('.'));
      header.writeUInt16BE(1, 6); // one answer
      const record = Buffer.alloc(16);
      record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(0, 6); // TTL 0: never cached
      record.writeUInt16BE(4, 10);
      address.split('.').forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
      parts.push(record);
    }
    socket.send(Buffer.concat(parts), from.port, from.address);
  });
  await new Promise<void>((done) => socket.bind(0, '127.0.0.1', done));
  const resolver = new Resolver();
  resolver.setServers([`127.0.0.1:${socket.address().port}`]);
  return {
    resolve: (host) => resolver.resolve4(host),
    asked,
    close: () => new Promise<void>((done) => socket.close(() => done())),
  };
}
