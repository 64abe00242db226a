import { invalidField } from '../errors';
import { emailMd5, isValidEmail, md5ToUuid } from './email';
import { publishesEvents, type CreateContactInput } from './model';
import { distinctIds } from './store';

/** What POST /v1/contacts asks for, as far as the request alone decides it (attributes aside: see AttributeSchema). */
export interface CreateRequest {
  /** As sent, trimmed: the contact's `email`. */
  email: string;
  /** md5 of the normalised address as the uuid the database stores. */
  key: string;
  /** Lowercased, without repeats, in the order sent; undefined when `brandIds` was not sent. */
  brandIds: string[] | undefined;
  /** Whether newly assigned brands get brand-subscribe events. */
  publish: boolean;
}

/**
 * The request-level rules of a create, for both paths: a 400 with its pointer, or the request read.
 * @example readCreateRequest({ email: ' Ann@Example.com ' }).email // 'Ann@Example.com'
 */
export function readCreateRequest(body: CreateContactInput): CreateRequest {
  const email = body.email.trim();
  if (!isValidEmail(email)) throw invalidField('/email', 'email must be a valid email address.');
  if (body.restoreDisabled === true && !body.duplicateContactStrategy) {
    throw invalidField('/restoreDisabled', 'restoreDisabled requires a duplicateContactStrategy.');
  }
  return {
    email,
    key: md5ToUuid(emailMd5(email)),
    brandIds: body.brandIds === undefined ? undefined : distinctIds(body.brandIds),
    publish: publishesEvents(body),
  };
}
