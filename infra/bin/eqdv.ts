#!/usr/bin/env node
// The CDK app: one env-agnostic stack (no account or region lookups at synth time).
// Settings come from context; see ../docs/deploy.md and lib/config.ts.
import { App } from 'aws-cdk-lib';

import { ConfigError, loadConfig } from '../lib/config';
import { EqdvStack } from '../lib/eqdv-stack';

const app = new App();
try {
  const config = loadConfig((key) => app.node.tryGetContext(key));
  const stackName = String(app.node.tryGetContext('stackName') ?? 'eqdv');
  new EqdvStack(app, 'Eqdv', {
    stackName,
    description: 'eqdv: converts Apache Iceberg equality delete files into deletion vectors (CDK)',
    analyticsReporting: false,
    config,
  });
} catch (e) {
  if (e instanceof ConfigError) {
    console.error(`eqdv infra: ${e.message}`);
    process.exit(2);
  }
  throw e;
}
