// The stack's settings, read from CDK context (`-c key=value` or cdk.json). They are
// the CDK counterparts of template.yaml's parameters; unlike CloudFormation
// parameters they are known at synth time, so lists become explicit ARNs and the
// queue's visibility timeout is computed.

/**
 * Where the tables are: the Glue Data Catalog, an Amazon S3 Tables table bucket, or an
 * Iceberg REST catalog (Polaris, Snowflake Open Catalog, Unity, Lakekeeper...; AWS's
 * own Iceberg REST endpoints are deployed as `glue` or `s3tables`).
 */
export type Catalog = 'glue' | 's3tables' | 'rest';

/** The settings of one eqdv deployment. */
export interface EqdvConfig {
  /**
   * The catalog (EQDV_CATALOG): decides the IAM statements and the planner's event rule
   * (none with `rest`, which emits no event: the sweep alone).
   */
  readonly catalog: Catalog;
  /**
   * With catalog `s3tables` (required then, and only then): the table bucket's ARN,
   * `arn:PARTITION:s3tables:REGION:ACCOUNT:bucket/NAME` (EQDV_S3TABLES_BUCKET_ARN).
   */
  readonly tableBucketArn: string;
  /**
   * Glue databases, or with catalog `s3tables` the table bucket's namespaces (with
   * `rest` the catalog's), eqdv may convert tables of (required).
   */
  readonly databases: string[];
  /**
   * S3 prefixes the tables live under, as `bucket/prefix` (required with catalog
   * `glue`; optional with `rest`, for a catalog that vends no credentials; ignored with
   * `s3tables`, whose storage the s3tables actions authorize).
   */
  readonly tableLocations: string[];
  /** Optional `db.table` allowlist; empty means every table of the databases. */
  readonly allowedTables: string[];
  /** Glue catalog id; empty means the deploying account's catalog (ignored with `s3tables`, `rest`). */
  readonly glueCatalogId: string;
  /**
   * With catalog `rest` (required then, and refused otherwise, as every `rest*` value):
   * the catalog's base URI before `/v1/`, https:// (EQDV_REST_URI).
   */
  readonly restUri: string;
  /** The warehouse the REST catalog's configuration is asked for (EQDV_WAREHOUSE); empty: its default. */
  readonly restWarehouse: string;
  /**
   * The full ARN of a Secrets Manager secret holding OAuth2 client credentials
   * `CLIENT_ID:CLIENT_SECRET` (EQDV_REST_CREDENTIAL_SECRET_ARN): both roles may read
   * that one secret. Empty: the catalog is called without authentication.
   */
  readonly restCredentialSecretArn: string;
  /** The OAuth2 scope (EQDV_REST_SCOPE); only with `restCredentialSecretArn`. */
  readonly restScope: string;
  /** The OAuth2 token endpoint (EQDV_REST_OAUTH2_SERVER_URI), https://; only with `restCredentialSecretArn`. */
  readonly restOAuth2ServerUri: string;
  readonly branch: string;
  readonly logLevel: string;
  readonly metricsNamespace: string;
  readonly sweepSchedule: string;
  readonly shardTargetMb: number;
  readonly queueGroups: number;
  readonly maxReceiveCount: number;
  readonly converterBatchSize: number;
  readonly converterMaxConcurrency: number;
  /**
   * A shard estimated above this many MB of work is split into data ranges of at most
   * this much each (2 to `maxRanges`), converted by the split state machine and
   * committed once; 0 splits every shard into `maxRanges`.
   */
  readonly splitAboveMb: number;
  readonly maxRanges: number;
  readonly plannerTimeout: number;
  /** Also sets the planner's share of vCPUs, which its own conversions use. */
  readonly plannerMemorySize: number;
  /**
   * A commit planned as one shard of at most this many MB of work (not split) is
   * converted by the planner in the same invocation instead of going to the shard
   * queue (which it still does on failure or when time runs short); 0 sends every
   * shard to the queue.
   */
  readonly convertInPlannerMaxMb: number;
  readonly converterTimeout: number;
  readonly converterMemorySize: number;
  readonly keyMemoryMb: number;
  /**
   * The key index's mode (EQDV_KEY_INDEX): `auto` uses and keeps a table's index and
   * builds one where a conversion read many data files; `true` builds it for every
   * table; `false` neither uses nor keeps one.
   */
  readonly keyIndex: 'auto' | 'true' | 'false';
  readonly parallelism: number;
  readonly readMemoryMb: number;
  /** Empty means the table's `commit.retry.num-retries`. */
  readonly commitRetries: string;
  readonly deadlineMarginSeconds: number;
  readonly logRetentionDays: number;
  /** SNS topic the alarms notify; empty means no alarm actions. */
  readonly alarmTopicArn: string;
  /** Directories holding cargo-lambda's `bootstrap` for each function. */
  readonly plannerAsset: string;
  readonly converterAsset: string;
}

/** Every context key the app reads, with its default (undefined = required). */
export const CONTEXT_DEFAULTS: Record<keyof EqdvConfig, string | undefined> = {
  catalog: 'glue',
  tableBucketArn: '',
  databases: undefined,
  // Required with catalog glue: checked below.
  tableLocations: '',
  allowedTables: '',
  glueCatalogId: '',
  // Required with catalog rest: checked below.
  restUri: '',
  restWarehouse: '',
  restCredentialSecretArn: '',
  restScope: '',
  restOAuth2ServerUri: '',
  branch: 'main',
  logLevel: 'info',
  metricsNamespace: 'eqdv',
  sweepSchedule: 'rate(1 hour)',
  shardTargetMb: '256',
  queueGroups: '1',
  maxReceiveCount: '5',
  converterBatchSize: '1',
  converterMaxConcurrency: '10',
  splitAboveMb: '1024',
  maxRanges: '32',
  plannerTimeout: '300',
  plannerMemorySize: '2048',
  convertInPlannerMaxMb: '256',
  converterTimeout: '900',
  converterMemorySize: '2048',
  keyMemoryMb: '512',
  keyIndex: 'auto',
  parallelism: '0',
  readMemoryMb: '64',
  commitRetries: '',
  deadlineMarginSeconds: '30',
  logRetentionDays: '30',
  alarmTopicArn: '',
  plannerAsset: '../target/lambda/eqdv-planner',
  converterAsset: '../target/lambda/eqdv-converter',
};

// Same patterns as template.yaml's parameters.
// Glue stores names in lowercase, and its events carry them so.
const DATABASE = /^[a-z0-9_-]{1,255}$/;
const TABLE = /^[a-z0-9_-]+\.[a-z0-9_-]+$/;
const LOCATION = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[^/*?]+)*$/;
const CATALOG_ID = /^[0-9]{12}$/;
const TABLE_BUCKET_ARN = /^arn:aws[a-z-]*:s3tables:[a-z0-9-]+:[0-9]{12}:bucket\/[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;
// Over HTTPS only: the token exchange sends the client secret.
const HTTPS_URI = /^https:\/\/[^/\s][^\s]*$/;
// The full ARN, with the 6 characters Secrets Manager appends to the name: the grant is
// on exactly this ARN, and a partial one would never match the secret.
const SECRET_ARN =
  /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const CATALOGS: Catalog[] = ['glue', 's3tables', 'rest'];
const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
  2922, 3288, 3653,
];

export class ConfigError extends Error {}

/**
 * Reads and checks the settings. `get` returns a context value: a string from
 * `-c key=value`, or any JSON value from cdk.json.
 */
export function loadConfig(get: (key: string) => unknown): EqdvConfig {
  const raw = (key: keyof EqdvConfig): string => {
    const value = get(key);
    if (value === undefined || value === null) {
      const fallback = CONTEXT_DEFAULTS[key];
      if (fallback === undefined) {
        throw new ConfigError(`context value ${key} is required (-c ${key}=...)`);
      }
      return fallback;
    }
    if (Array.isArray(value)) return value.map(String).join(',');
    return String(value).trim();
  };
  const list = (key: keyof EqdvConfig, pattern: RegExp, what: string): string[] => {
    const items = raw(key)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    for (const item of items) {
      if (!pattern.test(item)) throw new ConfigError(`${key}: '${item}' is not ${what}`);
    }
    if (new Set(items).size !== items.length) throw new ConfigError(`${key}: duplicate entries`);
    return items;
  };
  const int = (key: keyof EqdvConfig, min: number, max: number): number => {
    const text = raw(key);
    if (!/^[0-9]+$/.test(text)) throw new ConfigError(`${key}: '${text}' is not a whole number`);
    const n = Number(text);
    if (n < min || n > max) throw new ConfigError(`${key}: ${n} is not between ${min} and ${max}`);
    return n;
  };
  const keyIndexMode = (key: keyof EqdvConfig): 'auto' | 'true' | 'false' => {
    const text = raw(key).toLowerCase();
    if (text !== 'auto' && text !== 'true' && text !== 'false') {
      throw new ConfigError(`${key}: '${text}' is not auto, true or false`);
    }
    return text;
  };
  const nonEmpty = (key: keyof EqdvConfig): string => {
    const text = raw(key);
    if (text === '') throw new ConfigError(`${key} must not be empty`);
    return text;
  };

  const catalog = raw('catalog').toLowerCase() as Catalog;
  if (!CATALOGS.includes(catalog)) {
    throw new ConfigError(`catalog: '${catalog}' is not ${CATALOGS.join(', ')}`);
  }
  const databases = list(
    'databases',
    DATABASE,
    'a Glue database name or S3 Tables namespace (lowercase letters, digits, _ and -)',
  );
  if (databases.length === 0) throw new ConfigError('databases: give at least one database');
  const tableBucketArn = raw('tableBucketArn');
  if (tableBucketArn !== '' && !TABLE_BUCKET_ARN.test(tableBucketArn)) {
    throw new ConfigError(
      `tableBucketArn: '${tableBucketArn}' is not a table bucket ARN (arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)`,
    );
  }
  if (catalog === 's3tables' && tableBucketArn === '') {
    throw new ConfigError(
      'tableBucketArn is required with catalog s3tables (-c tableBucketArn=arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)',
    );
  }
  if (catalog !== 's3tables' && tableBucketArn !== '') {
    throw new ConfigError(`tableBucketArn is for catalog s3tables (-c catalog=s3tables), not ${catalog}`);
  }
  const restUri = raw('restUri');
  if (restUri !== '' && !HTTPS_URI.test(restUri)) {
    throw new ConfigError(`restUri: '${restUri}' is not an https:// URI`);
  }
  const restWarehouse = raw('restWarehouse');
  const restCredentialSecretArn = raw('restCredentialSecretArn');
  if (restCredentialSecretArn !== '' && !SECRET_ARN.test(restCredentialSecretArn)) {
    throw new ConfigError(
      `restCredentialSecretArn: '${restCredentialSecretArn}' is not a secret's full ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-SUFFIX)`,
    );
  }
  const restScope = raw('restScope');
  const restOAuth2ServerUri = raw('restOAuth2ServerUri');
  if (restOAuth2ServerUri !== '' && !HTTPS_URI.test(restOAuth2ServerUri)) {
    throw new ConfigError(`restOAuth2ServerUri: '${restOAuth2ServerUri}' is not an https:// URI`);
  }
  const rest = { restUri, restWarehouse, restCredentialSecretArn, restScope, restOAuth2ServerUri };
  if (catalog === 'rest') {
    if (restUri === '') {
      throw new ConfigError('restUri is required with catalog rest (-c restUri=https://...)');
    }
    if (restCredentialSecretArn === '' && (restScope !== '' || restOAuth2ServerUri !== '')) {
      throw new ConfigError(
        'restScope and restOAuth2ServerUri are for the client credentials of restCredentialSecretArn (set it, or leave them empty)',
      );
    }
  } else {
    // Unused with another catalog (restWarehouse would even be Glue's warehouse): refused.
    for (const [key, value] of Object.entries(rest)) {
      if (value !== '') throw new ConfigError(`${key} is for catalog rest (-c catalog=rest), not ${catalog}`);
    }
  }
  const tableLocations = list(
    'tableLocations',
    LOCATION,
    'bucket or bucket/prefix (no s3://, wildcards or trailing slash)',
  );
  if (catalog === 'glue' && tableLocations.length === 0) {
    throw new ConfigError('tableLocations is required with catalog glue (-c tableLocations=bucket/prefix,...)');
  }
  const allowedTables = list('allowedTables', TABLE, 'db.table');
  for (const table of allowedTables) {
    const db = table.split('.')[0];
    if (!databases.includes(db)) {
      throw new ConfigError(`allowedTables: ${table} is not in one of the databases (${databases.join(',')})`);
    }
  }
  const glueCatalogId = raw('glueCatalogId');
  if (glueCatalogId !== '' && !CATALOG_ID.test(glueCatalogId)) {
    throw new ConfigError(`glueCatalogId: '${glueCatalogId}' is not a 12-digit account id`);
  }
  const commitRetries = raw('commitRetries');
  if (commitRetries !== '' && !/^[0-9]+$/.test(commitRetries)) {
    throw new ConfigError(`commitRetries: '${commitRetries}' is not empty or a whole number`);
  }
  const logRetentionDays = int('logRetentionDays', 1, 3653);
  if (!LOG_RETENTION_DAYS.includes(logRetentionDays)) {
    throw new ConfigError(`logRetentionDays: ${logRetentionDays} is not one of ${LOG_RETENTION_DAYS.join(', ')}`);
  }
  const deadlineMarginSeconds = int('deadlineMarginSeconds', 0, 899);
  const converterTimeout = int('converterTimeout', 1, 900);
  if (converterTimeout <= deadlineMarginSeconds) {
    throw new ConfigError(
      `converterTimeout (${converterTimeout}) must exceed deadlineMarginSeconds (${deadlineMarginSeconds})`,
    );
  }

  return {
    catalog,
    tableBucketArn,
    databases,
    tableLocations,
    allowedTables,
    glueCatalogId,
    ...rest,
    branch: nonEmpty('branch'),
    logLevel: nonEmpty('logLevel'),
    metricsNamespace: nonEmpty('metricsNamespace'),
    sweepSchedule: nonEmpty('sweepSchedule'),
    shardTargetMb: int('shardTargetMb', 1, 1_000_000),
    queueGroups: int('queueGroups', 1, 16),
    maxReceiveCount: int('maxReceiveCount', 1, 1000),
    converterBatchSize: int('converterBatchSize', 1, 10),
    converterMaxConcurrency: int('converterMaxConcurrency', 2, 1000),
    splitAboveMb: int('splitAboveMb', 0, 1_000_000),
    // The engine's own bound (eqdv::convert::MAX_RANGES).
    maxRanges: int('maxRanges', 2, 1024),
    plannerTimeout: int('plannerTimeout', 10, 900),
    plannerMemorySize: int('plannerMemorySize', 128, 10240),
    convertInPlannerMaxMb: int('convertInPlannerMaxMb', 0, 1_000_000),
    converterTimeout,
    converterMemorySize: int('converterMemorySize', 128, 10240),
    keyMemoryMb: int('keyMemoryMb', 1, 1_000_000),
    keyIndex: keyIndexMode('keyIndex'),
    parallelism: int('parallelism', 0, 1024),
    readMemoryMb: int('readMemoryMb', 1, 1_000_000),
    commitRetries,
    deadlineMarginSeconds,
    logRetentionDays,
    alarmTopicArn: raw('alarmTopicArn'),
    plannerAsset: nonEmpty('plannerAsset'),
    converterAsset: nonEmpty('converterAsset'),
  };
}

/** The shard queue's visibility timeout: 6x the converter's timeout, at most 12 hours. */
export function shardVisibilitySeconds(config: EqdvConfig): number {
  return Math.min(6 * config.converterTimeout, 43200);
}
