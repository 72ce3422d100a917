import { ConfigError, loadConfig, shardVisibilitySeconds } from '../lib/config';

const required = { databases: 'sales', tableLocations: 'my-lake/warehouse' };
const BUCKET = 'arn:aws:s3tables:eu-west-1:111122223333:bucket/lake';
const s3tables = { catalog: 's3tables', tableBucketArn: BUCKET, databases: 'sales' };
const REST_URI = 'https://catalog.example.com/api/catalog';
const SECRET = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:eqdv/rest-AbC123';
const rest = { catalog: 'rest', restUri: REST_URI, databases: 'sales' };
const load = (context: Record<string, unknown>) => loadConfig((key) => context[key]);

describe('loadConfig', () => {
  test('defaults match template.yaml', () => {
    const c = load(required);
    expect(c).toEqual({
      catalog: 'glue',
      tableBucketArn: '',
      databases: ['sales'],
      tableLocations: ['my-lake/warehouse'],
      allowedTables: [],
      glueCatalogId: '',
      restUri: '',
      restWarehouse: '',
      restCredentialSecretArn: '',
      restScope: '',
      restOAuth2ServerUri: '',
      branch: 'main',
      logLevel: 'info',
      metricsNamespace: 'eqdv',
      sweepSchedule: 'rate(1 hour)',
      shardTargetMb: 256,
      queueGroups: 1,
      maxReceiveCount: 5,
      converterBatchSize: 1,
      converterMaxConcurrency: 10,
      splitAboveMb: 1024,
      maxRanges: 32,
      plannerTimeout: 300,
      plannerMemorySize: 2048,
      convertInPlannerMaxMb: 256,
      converterTimeout: 900,
      converterMemorySize: 2048,
      keyMemoryMb: 512,
      keyIndex: 'auto',
      parallelism: 0,
      readMemoryMb: 64,
      commitRetries: '',
      deadlineMarginSeconds: 30,
      logRetentionDays: 30,
      alarmTopicArn: '',
      plannerAsset: '../target/lambda/eqdv-planner',
      converterAsset: '../target/lambda/eqdv-converter',
    });
    expect(shardVisibilitySeconds(c)).toBe(5400);
  });

  test('lists from -c (comma-separated, spaces trimmed) or cdk.json (arrays), numbers from either', () => {
    expect(load({ ...required, databases: 'a, b ,c' }).databases).toEqual(['a', 'b', 'c']);
    expect(load({ ...required, databases: ['a', 'b'] }).databases).toEqual(['a', 'b']);
    expect(load({ ...required, converterTimeout: 60 }).converterTimeout).toBe(60);
    expect(load({ ...required, splitAboveMb: 4096, maxRanges: '2' })).toMatchObject({ splitAboveMb: 4096, maxRanges: 2 });
    // 0: every shard is split into maxRanges.
    expect(load({ ...required, splitAboveMb: '0' }).splitAboveMb).toBe(0);
    expect(shardVisibilitySeconds(load({ ...required, converterTimeout: '60' }))).toBe(360);
  });

  test('convertInPlannerMaxMb from -c (a string) or cdk.json (a number); 0 turns it off', () => {
    expect(load({ ...required, convertInPlannerMaxMb: '64' }).convertInPlannerMaxMb).toBe(64);
    expect(load({ ...required, convertInPlannerMaxMb: 1024 }).convertInPlannerMaxMb).toBe(1024);
    // 0: every shard goes to the queue, and the planner can go back to 512 MB.
    expect(load({ ...required, convertInPlannerMaxMb: 0, plannerMemorySize: '512' })).toMatchObject({
      convertInPlannerMaxMb: 0,
      plannerMemorySize: 512,
    });
  });

  test('catalog s3tables: the table bucket, namespaces as databases, no table locations needed', () => {
    expect(load(s3tables)).toMatchObject({
      catalog: 's3tables',
      tableBucketArn: BUCKET,
      databases: ['sales'],
      tableLocations: [],
    });
    // Other partitions; table locations are accepted and ignored (the stack grants no s3:*).
    const cn = 'arn:aws-cn:s3tables:cn-north-1:111122223333:bucket/my-lake-2';
    expect(load({ ...s3tables, tableBucketArn: cn, tableLocations: 'my-lake' })).toMatchObject({
      tableBucketArn: cn,
      tableLocations: ['my-lake'],
    });
    expect(load({ ...s3tables, catalog: 'S3Tables' }).catalog).toBe('s3tables');
    expect(load({ ...required, catalog: 'glue' }).catalog).toBe('glue');
  });

  test('catalog rest: the URI, optional warehouse, credential secret, scope, token endpoint and locations', () => {
    expect(load(rest)).toMatchObject({
      catalog: 'rest',
      restUri: REST_URI,
      restWarehouse: '',
      restCredentialSecretArn: '',
      restScope: '',
      restOAuth2ServerUri: '',
      tableBucketArn: '',
      databases: ['sales'],
      // A catalog that vends credentials needs none.
      tableLocations: [],
    });
    const full = {
      ...rest,
      restWarehouse: 'lake',
      restCredentialSecretArn: SECRET,
      restScope: 'PRINCIPAL_ROLE:ALL',
      restOAuth2ServerUri: 'https://auth.example.com/oauth/tokens',
      tableLocations: 'my-lake/warehouse',
    };
    expect(load(full)).toMatchObject({
      restWarehouse: 'lake',
      restCredentialSecretArn: SECRET,
      restScope: 'PRINCIPAL_ROLE:ALL',
      restOAuth2ServerUri: 'https://auth.example.com/oauth/tokens',
      tableLocations: ['my-lake/warehouse'],
    });
    // Other partitions, a port, names with the characters Secrets Manager allows.
    const gov = 'arn:aws-us-gov:secretsmanager:us-gov-west-1:111122223333:secret:team/eqdv_rest.v2-x9Y8z7';
    expect(load({ ...rest, restUri: 'https://polaris.internal:8181/api/catalog', restCredentialSecretArn: gov }))
      .toMatchObject({ restUri: 'https://polaris.internal:8181/api/catalog', restCredentialSecretArn: gov });
    expect(load({ ...rest, catalog: 'REST' }).catalog).toBe('rest');
  });

  test.each([
    [{ tableLocations: 'x/y' }, /databases is required/],
    [{ databases: 'sales', tableLocations: '' }, /tableLocations is required with catalog glue/],
    [{ ...required, catalog: 'hive' }, /catalog: 'hive' is not glue, s3tables, rest/],
    [{ catalog: 'rest', databases: 'sales' }, /restUri is required with catalog rest/],
    [{ ...rest, restUri: '' }, /restUri is required with catalog rest/],
    // HTTPS only: the token exchange sends the client secret.
    [{ ...rest, restUri: 'http://catalog.example.com' }, /restUri: 'http:\/\/catalog.example.com' is not an https/],
    [{ ...rest, restUri: 'catalog.example.com' }, /restUri: .* is not an https/],
    [{ ...rest, restUri: 'https://catalog example' }, /restUri: .* is not an https/],
    [{ ...rest, restCredentialSecretArn: SECRET, restOAuth2ServerUri: 'http://auth/token' }, /restOAuth2ServerUri: .* is not an https/],
    // The secret's full ARN only: a grant on a partial one would never match it.
    [{ ...rest, restCredentialSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:eqdv' }, /is not a secret's full ARN/],
    [{ ...rest, restCredentialSecretArn: SECRET.replace('secretsmanager', 'ssm') }, /is not a secret's full ARN/],
    [{ ...rest, restCredentialSecretArn: SECRET.replace('111122223333', '*') }, /is not a secret's full ARN/],
    [{ ...rest, restCredentialSecretArn: 'eqdv/rest' }, /restCredentialSecretArn: 'eqdv\/rest' is not a secret's full ARN/],
    [{ ...rest, restScope: 'catalog' }, /restScope and restOAuth2ServerUri are for the client credentials/],
    [{ ...rest, restOAuth2ServerUri: 'https://auth/token' }, /restScope and restOAuth2ServerUri are for the client credentials/],
    [{ ...rest, tableBucketArn: BUCKET }, /tableBucketArn is for catalog s3tables .*, not rest/],
    // The rest* values with another catalog are refused, not ignored.
    [{ ...required, restUri: REST_URI }, /restUri is for catalog rest \(-c catalog=rest\), not glue/],
    [{ ...required, restWarehouse: 'lake' }, /restWarehouse is for catalog rest/],
    [{ ...required, restCredentialSecretArn: SECRET }, /restCredentialSecretArn is for catalog rest/],
    [{ ...s3tables, restUri: REST_URI }, /restUri is for catalog rest \(-c catalog=rest\), not s3tables/],
    [{ ...s3tables, restScope: 'catalog' }, /restScope is for catalog rest/],
    [{ ...s3tables, restOAuth2ServerUri: 'https://auth/token' }, /restOAuth2ServerUri is for catalog rest/],
    [{ ...required, tableBucketArn: BUCKET }, /tableBucketArn is for catalog s3tables/],
    [{ catalog: 's3tables', databases: 'sales' }, /tableBucketArn is required with catalog s3tables/],
    [{ ...s3tables, tableBucketArn: '' }, /tableBucketArn is required with catalog s3tables/],
    [{ ...s3tables, tableBucketArn: 'arn:aws:s3:::lake' }, /tableBucketArn: 'arn:aws:s3:::lake' is not a table bucket ARN/],
    [{ ...s3tables, tableBucketArn: `${BUCKET}/table/t` }, /tableBucketArn: .* is not a table bucket ARN/],
    [{ ...s3tables, tableBucketArn: BUCKET.replace('lake', 'Lake') }, /is not a table bucket ARN/],
    [{ ...s3tables, tableBucketArn: BUCKET.replace('111122223333', '*') }, /is not a table bucket ARN/],
    [{ ...s3tables, tableBucketArn: 'lake' }, /is not a table bucket ARN/],
    [{ ...s3tables, databases: '' }, /at least one database/],
    [{ databases: 'sales' }, /tableLocations is required/],
    [{ ...required, databases: '' }, /at least one database/],
    [{ ...required, databases: 'sales,*' }, /'\*' is not a Glue database name/],
    [{ ...required, databases: 'sales,sales' }, /duplicate/],
    [{ ...required, databases: 'Sales' }, /'Sales' is not a Glue database name/],
    [{ ...required, tableLocations: 's3://my-lake/warehouse' }, /is not bucket or bucket\/prefix/],
    [{ ...required, tableLocations: 'my-lake/warehouse/' }, /is not bucket or bucket\/prefix/],
    [{ ...required, tableLocations: 'my-lake/ware*' }, /is not bucket or bucket\/prefix/],
    [{ ...required, allowedTables: 'other.t' }, /not in one of the databases/],
    [{ ...required, allowedTables: 'sales' }, /is not db.table/],
    [{ ...required, glueCatalogId: '123' }, /12-digit/],
    [{ ...required, converterTimeout: '901' }, /between 1 and 900/],
    [{ ...required, converterTimeout: '30' }, /must exceed deadlineMarginSeconds/],
    [{ ...required, converterMaxConcurrency: '1' }, /between 2 and 1000/],
    [{ ...required, converterBatchSize: '11' }, /between 1 and 10/],
    [{ ...required, queueGroups: '17' }, /between 1 and 16/],
    [{ ...required, splitAboveMb: '1000001' }, /splitAboveMb: 1000001 is not between 0 and 1000000/],
    [{ ...required, convertInPlannerMaxMb: '-1' }, /convertInPlannerMaxMb: '-1' is not a whole number/],
    [{ ...required, convertInPlannerMaxMb: '1000001' }, /convertInPlannerMaxMb: 1000001 is not between 0 and 1000000/],
    [{ ...required, maxRanges: '1' }, /maxRanges: 1 is not between 2 and 1024/],
    [{ ...required, maxRanges: '1025' }, /maxRanges: 1025 is not between 2 and 1024/],
    [{ ...required, maxReceiveCount: 'five' }, /not a whole number/],
    [{ ...required, commitRetries: '-1' }, /not empty or a whole number/],
    [{ ...required, logRetentionDays: '10' }, /not one of/],
    [{ ...required, branch: '' }, /branch must not be empty/],
  ])('rejects %j', (context, message) => {
    expect(() => load(context)).toThrow(ConfigError);
    expect(() => load(context)).toThrow(message);
  });
});
