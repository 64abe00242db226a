import { createHmac } from 'node:crypto';

/**
 * The `webhook-signature` of a delivery, per the Standard Webhooks specification: `v1,` and the
 * base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`, keyed with the secret's bytes (the base64
 * after `whsec_`). Receivers check it with the `standardwebhooks` package (docs/events-and-webhooks.md).
 *
 * @example
 * // The specification's own example:
 * signDelivery('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330,
 *   '{"test": 2432232314}') // 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='
 */
export function signDelivery(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}
