import { t } from 'elysia';

const md5Error = 'emailMd5 must be 32 hexadecimal characters (the MD5 of the lowercased email address).';

export const EmailMd5Params = t.Object({
  emailMd5: t.String({
    pattern: '^[A-Fa-f0-9]{32}$',
    error: md5Error,
    description: 'md5(lower(email)); uppercase hex accepted.',
  }),
});

export const ContactBrandParams = t.Object({
  emailMd5: EmailMd5Params.properties.emailMd5,
  brandId: t.String({ format: 'uuid', error: 'brandId must be a UUID.' }),
});

const Uuid = t.String({ format: 'uuid' });

export const AttributeValue = t.Union([t.String(), t.Number(), t.Boolean(), t.Array(t.String())]);

export const Contact = t.Object({
  email: t.String({ description: 'The contact’s email address, as first sent.' }),
  emailMd5: t.String({ pattern: '^[a-f0-9]{32}$', description: 'md5(lower(email)).' }),
  attributes: t.Record(t.String(), AttributeValue, {
    description:
      'Schema attribute name → typed value; absent when unanswered. Email-type attributes also give ' +
      'read-only name:md5, name:sha256, name:sha512 and name:domain.',
  }),
  brandIds: t.Array(Uuid, { description: 'May include ids of brands that have since been deleted.' }),
  enabled: t.Boolean(),
  createdAt: t.String({ format: 'date-time', description: 'When the contact was first added.' }),
});
export type ContactBody = typeof Contact.static;

const Strategy = t.Union([t.Literal('overwrite'), t.Literal('keep'), t.Literal('skip')], {
  error: 'duplicateContactStrategy must be overwrite, keep or skip.',
});

const AttributesInput = t.Record(t.String(), t.Unknown(), {
  description:
    'Schema attribute name (case-insensitive) → value: native JSON or canonical text ("42", "true"); ' +
    'lists as arrays of strings.',
});

export const CreateContactBody = t.Object(
  {
    email: t.String({ description: 'Plaintext address; the identity is derived from it and never changes.' }),
    brandIds: t.Optional(
      t.Array(Uuid, { description: 'Every id must be a live brand in the account. Repeats count once.' }),
    ),
    publishBrandSubscribeEvents: t.Optional(t.Boolean({ description: 'Default true.' })),
    attributes: t.Optional(AttributesInput),
    duplicateContactStrategy: t.Optional(Strategy),
    overwriteBrands: t.Optional(t.Boolean({ description: 'Default false; applies only with overwrite.' })),
    restoreDisabled: t.Optional(
      t.Boolean({ description: 'Enables a disabled contact again; requires duplicateContactStrategy.' }),
    ),
  },
  { additionalProperties: false },
);
export type CreateContactInput = typeof CreateContactBody.static;

/** Whether a create or add-brands request publishes brand-subscribe events: unless it sends false. */
export const publishesEvents = (body: { publishBrandSubscribeEvents?: boolean }) =>
  body.publishBrandSubscribeEvents ?? true;

export const PatchContactBody = t.Object(
  {
    attributes: t.Record(t.String(), t.Unknown(), {
      description:
        'RFC 7386 merge patch: a value sets the attribute, null removes it, absent attributes are untouched.',
    }),
  },
  { additionalProperties: false },
);

export const DisableContactBody = t.Optional(
  t.Object({}, { additionalProperties: false, description: 'No body, or an empty JSON object.' }),
);

export const AddBrandsBody = t.Object(
  {
    brandIds: t.Array(Uuid, {
      minItems: 1,
      maxItems: 100,
      uniqueItems: true,
      description: '1 to 100 unique brand ids.',
    }),
    publishBrandSubscribeEvents: t.Optional(t.Boolean({ description: 'Default true.' })),
  },
  { additionalProperties: false },
);

export const ContactBrands = t.Object({ brands: t.Array(t.Object({ id: Uuid, name: t.String() })) });

/** Top-level fields each body accepts, and which of them must be JSON objects (see body.ts). */
export const BODY_FIELDS = {
  create: { allowed: Object.keys(CreateContactBody.properties), objects: ['attributes'] },
  patch: { allowed: ['attributes'], objects: ['attributes'] },
  disable: { allowed: [], objects: [] },
  addBrands: { allowed: Object.keys(AddBrandsBody.properties), objects: [] },
} as const;

export const EraseContactsBody = t.Object(
  {
    emailMd5s: t.Array(EmailMd5Params.properties.emailMd5, {
      minItems: 1,
      maxItems: 1000,
      error: 'emailMd5s must be a list of 1 to 1000 emailMd5s.',
      description: '1 to 1000 emailMd5s (md5 of the lowercased address), each once; uppercase hex accepted.',
    }),
  },
  { additionalProperties: false },
);

export const ErasureCounts = t.Object({
  erasedCount: t.Integer({ description: 'Contacts that existed and were erased.' }),
  notFoundCount: t.Integer({ description: 'emailMd5s with no contact in the account: nothing to erase.' }),
});
