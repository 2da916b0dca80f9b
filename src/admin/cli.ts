import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { identityCollections } from '../identity/identity-store.ts';
import { newPlatformKey } from '../identity/secrets.ts';
import { nowIso } from '../ids.ts';
import { createLogger } from '../log.ts';
import { platformScope, type Store } from '../store/collection.ts';
import { createStore } from '../store/index.ts';
import { maxShareWeight } from '../runtime/share-weights.ts';
import { shareWeightCollection } from './share-weight-store.ts';

const usage = `usage: npm run admin -- rate-limit --org <organization id> (--per-minute N --burst N | --default)
       npm run admin -- share-weight --org <organization id> (--weight N | --default)
       npm run admin -- platform-key

rate-limit sets an organization's own rate limit, or gives it back the default
(RATE_LIMIT_PER_MINUTE, RATE_LIMIT_BURST). Uses MONGODB_URL, or the embedded
store in DATA_DIR (stop the service first: it owns those files while it runs).
Frontends pick the change up within CREDENTIAL_CACHE_MS.

share-weight sets an organization's weight in the round robin that serves
bulk and maintenance work by organization (1 to ${maxShareWeight}; the default
is 1, equal shares): at its turn it takes that many steps in a row. Workers
pick the change up within SHARE_WEIGHT_REFRESH_MS (30 s).

platform-key prints a new platform-admin key and its SHA-256 digest: add the
digest to PLATFORM_ADMIN_KEY_HASHES (comma-separated) and give the key to the
operator; the service stores no key, only the digests it is configured with.`;

/** Operator commands: what the platform decides for an organization, never the organization itself. */
async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      org: { type: 'string' },
      'per-minute': { type: 'string' },
      burst: { type: 'string' },
      default: { type: 'boolean' },
      weight: { type: 'string' },
    },
  });
  if (positionals[0] === 'platform-key' && positionals.length === 1) {
    const key = newPlatformKey();
    console.log(`key:    ${key.raw}\ndigest: ${key.hash}`);
    return 0;
  }
  if (positionals[0] === 'share-weight' && values.org) return shareWeight(values.org, values.weight, values.default);
  if (positionals[0] !== 'rate-limit' || !values.org) {
    console.error(usage);
    return 2;
  }
  const positive = (raw: string | undefined) =>
    raw !== undefined && /^[1-9][0-9]{0,8}$/.test(raw) ? Number(raw) : undefined;
  const perMinute = positive(values['per-minute']);
  const burst = positive(values.burst);
  if (!values.default && (perMinute === undefined || burst === undefined)) {
    console.error(`--per-minute and --burst must be whole numbers from 1\n\n${usage}`);
    return 2;
  }
  const store = openStore();
  const { organizations } = identityCollections(store);
  await store.init();
  try {
    const update = values.default
      ? { $unset: { rateLimit: '' }, $set: { updatedAt: nowIso() } }
      : { $set: { rateLimit: { perMinute: perMinute!, burst: burst! }, updatedAt: nowIso() } };
    const org = await organizations.updateOne({ tenantId: values.org }, { id: values.org }, update);
    if (!org) {
      console.error(`no organization ${values.org}`);
      return 1;
    }
    console.log(
      values.default
        ? `${org.id} (${org.name}) uses the default rate limit`
        : `${org.id} (${org.name}): ${perMinute} requests a minute, burst ${burst}`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

/** The store the service uses: MONGODB_URL, or the embedded one in DATA_DIR. */
function openStore(): Store {
  const config = loadConfig();
  return createStore(
    {
      mongoUrl: config.mongoUrl,
      dataDir: config.dataDir,
      pingTimeoutMs: config.storePingTimeoutMs,
      mongoWrites: config.mongoWrites,
      mongoPaths: config.mongoPaths,
    },
    createLogger('warn'),
  );
}

async function shareWeight(orgId: string, raw: string | undefined, toDefault: boolean | undefined): Promise<number> {
  const weight = raw !== undefined && /^[0-9]{1,2}$/.test(raw) ? Number(raw) : undefined;
  if (!toDefault && (weight === undefined || weight < 1 || weight > maxShareWeight)) {
    console.error(`--weight must be a whole number from 1 to ${maxShareWeight}\n\n${usage}`);
    return 2;
  }
  const store = openStore();
  const { organizations } = identityCollections(store);
  const weights = shareWeightCollection(store);
  await store.init();
  try {
    const org = await organizations.findOne({ tenantId: orgId }, { id: orgId });
    if (!org) {
      console.error(`no organization ${orgId}`);
      return 1;
    }
    await weights.deleteOne(platformScope, { id: orgId });
    if (toDefault || weight === 1) {
      console.log(`${org.id} (${org.name}) has the default share weight, 1`);
      return 0;
    }
    await weights.insertOne(platformScope, {
      id: orgId,
      tenantId: platformScope.tenantId,
      weight: weight!,
      updatedAt: nowIso(),
    });
    console.log(`${org.id} (${org.name}): share weight ${weight}`);
    return 0;
  } finally {
    await store.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
