/**
 * Webhook URLs rill refuses to call (SSRF) and the ones it calls, with and without the
 * development setting that allows localhost; and the resolved-address check a delivery
 * makes when it connects.
 */
import { describe, expect, test } from 'vitest';
import { checkWebhookUrl, isForbiddenAddress, isLoopbackAddress, MAX_WEBHOOK_URL_BYTES } from '../../src/core/webhook-url.js';

const accepted = (raw: string, allowLocalhost = false) => {
  const check = checkWebhookUrl(raw, allowLocalhost);
  return check.ok ? check.url.href : `refused: ${check.reason}`;
};

describe('checkWebhookUrl', () => {
  test('accepts https URLs to public names and addresses, with ports, paths and queries', () => {
    expect(accepted('https://hooks.example.com/rill?key=abc')).toBe('https://hooks.example.com/rill?key=abc');
    expect(accepted('https://hooks.example.com:8443/x')).toBe('https://hooks.example.com:8443/x');
    expect(accepted('https://8.8.8.8/hook')).toBe('https://8.8.8.8/hook');
    expect(accepted('https://[2606:4700:4700::1111]/hook')).toBe('https://[2606:4700:4700::1111]/hook');
    expect(accepted('https://172.32.0.1/')).toBe('https://172.32.0.1/'); // just outside 172.16/12
    expect(accepted('https://100.128.0.1/')).toBe('https://100.128.0.1/'); // just outside 100.64/10
    expect(accepted('https://not-localhost.example/')).toBe('https://not-localhost.example/');
  });

  test('refuses other schemes, user info, fragments, port 0, spaces and control characters', () => {
    const refused = [
      'http://hooks.example.com/',
      'ftp://hooks.example.com/',
      'javascript:alert(1)',
      'hooks.example.com/path',
      '/relative',
      '',
      'https://user:pw@hooks.example.com/',
      'https://user@hooks.example.com/',
      'https://hooks.example.com/#frag',
      'https://hooks.example.com/#',
      'https://hooks.example.com:0/',
      ' https://hooks.example.com/',
      'https://hooks.exa\tmple.com/',
      'https://hooks.example.com/\n',
      'https://hooks.example.com/a b',
      'https://hooks.example.com/\u007f',
    ];
    for (const raw of refused) expect(checkWebhookUrl(raw, false).ok, JSON.stringify(raw)).toBe(false);
    expect(checkWebhookUrl('http://hooks.example.com/', true)).toEqual({ ok: false, reason: 'the webhook URL must use https unless its host is localhost' });
  });

  test('refuses URLs longer than 2048 bytes, counting UTF-8 bytes', () => {
    const base = 'https://hooks.example.com/';
    expect(accepted(base + 'a'.repeat(MAX_WEBHOOK_URL_BYTES - base.length))).not.toMatch(/^refused/);
    expect(accepted(base + 'a'.repeat(MAX_WEBHOOK_URL_BYTES - base.length + 1))).toMatch(/longer than 2048 bytes/);
    // 'é' is two bytes: 1024 of them after the base pass 2048 bytes though not 2048 characters.
    expect(accepted(base + 'é'.repeat(1024))).toMatch(/longer than 2048 bytes/);
  });

  test('refuses the documentation ranges, the 6to4 relay anycast and their IPv4-mapped forms; accepts their neighbours', () => {
    const refused = ['192.0.2.1', '192.0.2.255', '198.51.100.7', '203.0.113.200', '192.88.99.1', '2001:db8::1', '2001:db8:ffff::1', '2001:0db8:0:0:0:0:0:1'];
    const mapped = ['192.0.2.1', '198.51.100.7', '203.0.113.200', '192.88.99.1', '10.1.2.3', '100.64.0.1', '198.18.0.1', '224.0.0.1'].flatMap((v4) => {
      const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
      return [`::ffff:${v4}`, `::ffff:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`];
    });
    for (const ip of [...refused, ...mapped]) {
      expect(isForbiddenAddress(ip, false), ip).toBe(true);
      expect(accepted(`https://${ip.includes(':') ? `[${ip}]` : ip}/`), ip).toMatch(/^refused: .* is not a public address/);
    }
    for (const ip of ['192.0.3.1', '198.51.101.1', '203.0.114.1', '192.88.98.1', '2001:db9::1', '::ffff:192.0.3.1', '::ffff:8.8.8.8']) {
      expect(isForbiddenAddress(ip, false), ip).toBe(false);
    }
  });

  test('refuses private, loopback, link-local and other non-public IP literals in every spelling', () => {
    const refused = [
      'https://127.0.0.1/', 'https://127.255.1.2/', 'https://0.0.0.0/', 'https://0.1.2.3/',
      'https://10.0.0.1/', 'https://10.255.255.255/', 'https://172.16.0.1/', 'https://172.31.255.254/',
      'https://192.168.1.1/', 'https://169.254.169.254/latest/meta-data', 'https://100.64.0.1/', 'https://100.127.255.255/',
      'https://192.0.0.170/', 'https://198.18.0.1/', 'https://224.0.0.1/', 'https://239.1.1.1/', 'https://255.255.255.255/',
      // Spellings the URL parser turns into 127.0.0.1 or 10.0.0.1.
      'https://2130706433/', 'https://0x7f000001/', 'https://0177.0.0.1/', 'https://127.1/', 'https://127.0.0.1./', 'https://0xa.0.0.1/',
      'https://[::1]/', 'https://[::]/', 'https://[0:0:0:0:0:0:0:1]/', 'https://[fc00::1]/', 'https://[fd12:3456::1]/',
      'https://[fe80::1]/', 'https://[febf::1]/', 'https://[fec0::1]/', 'https://[ff02::1]/',
      'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://[::ffff:10.0.0.1]/', 'https://[::ffff:169.254.169.254]/',
      'https://[::127.0.0.1]/', 'https://[::8.8.8.8]/', 'https://[64:ff9b::10.0.0.1]/', 'https://[64:ff9b:1::a00:1]/',
      'https://[2002:a00:1::1]/', 'https://[2001:0:4136:e378::1]/',
    ];
    for (const raw of refused) expect(accepted(raw), raw).toMatch(/^refused: .* is not a public address(; a server started with --webhook-allow-localhost .*)?$/);
    expect(accepted('https://[64:ff9b::8.8.8.8]/')).toBe('https://[64:ff9b::808:808]/');
    expect(accepted('https://[2002:808:808::1]/')).toBe('https://[2002:808:808::1]/');
  });

  test('refuses localhost and its subdomains by name', () => {
    for (const raw of ['https://localhost/', 'https://LOCALHOST:8443/', 'https://localhost./', 'https://api.localhost/', 'https://a.b.localhost./']) {
      expect(accepted(raw), raw).toMatch(/^refused: .* is local; a server started with --webhook-allow-localhost \(development only\) calls localhost, over http too$/);
    }
  });

  test('the development setting allows http and https to localhost, 127/8 and ::1, and nothing else private', () => {
    for (const raw of ['http://localhost:8080/hook', 'https://localhost/', 'http://127.0.0.1:9/', 'http://127.8.9.10/', 'http://[::1]:80/', 'http://api.localhost/', 'http://[::ffff:127.0.0.1]/']) {
      expect(accepted(raw, true), raw).not.toMatch(/^refused/);
    }
    for (const raw of ['https://10.0.0.1/', 'http://10.0.0.1/', 'https://192.168.0.1/', 'https://[fe80::1]/', 'https://0.0.0.0/', 'https://[::]/', 'https://169.254.169.254/']) {
      expect(accepted(raw, true), raw).toMatch(/^refused/);
    }
    expect(accepted('https://hooks.example.com/', true)).toBe('https://hooks.example.com/');
  });
});

describe('isForbiddenAddress', () => {
  test('answers for addresses as DNS gives them, failing closed on anything that is not an address', () => {
    const forbidden = ['127.0.0.1', '10.1.2.3', '172.20.0.5', '192.168.0.10', '169.254.0.1', '100.64.1.1', '0.0.0.0', '::1', '::', 'fe80::1%eth0', 'fd00::5', '::ffff:192.168.0.1', '::FFFF:C0A8:1', 'not an ip', '', '1.2.3', '1.2.3.256', '1::2::3', 'g::1', '1:2:3:4:5:6:7:8:9'];
    for (const ip of forbidden) expect(isForbiddenAddress(ip, false), ip).toBe(true);
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8', '1:2:3:4:5:6:7:8']) {
      expect(isForbiddenAddress(ip, false), ip).toBe(false);
    }
  });

  test('the development setting allows loopback addresses only', () => {
    for (const ip of ['127.0.0.1', '127.0.1.1', '::1', '::ffff:127.0.0.1']) {
      expect(isForbiddenAddress(ip, true), ip).toBe(false);
      expect(isLoopbackAddress(ip), ip).toBe(true);
    }
    for (const ip of ['10.0.0.1', '::', '0.0.0.0', 'fe80::1', '192.168.1.1']) expect(isForbiddenAddress(ip, true), ip).toBe(true);
    expect(isLoopbackAddress('::2')).toBe(false);
    expect(isLoopbackAddress('128.0.0.1')).toBe(false);
  });
});
