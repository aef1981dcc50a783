// A real OpenID provider for tests: npm oidc-provider (installed by `cargo xtask setup oidc`),
// configured from the JSON file named by argv[2] and listening on loopback. Prints
// "listening <issuer>" on stdout once it accepts connections.
//
// Resources (RFC 8707) map to JWT access tokens:
//   urn:nsight:api        -> aud = config.audience, ttl = config.ttl_s
//   urn:nsight:api-short  -> aud = config.audience, ttl = config.short_ttl_s
//   urn:other:api         -> aud = "other-service" (a token for someone else)
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { default: Provider } = await import(
  pathToFileURL(`${config.module_dir}/node_modules/oidc-provider/lib/index.js`).href
);

// A fresh RS256 signing key per run (published at /jwks).
const signingKey = {
  ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid: 'op-rsa-1',
  use: 'sig',
  alg: 'RS256',
};

const resources = {
  'urn:nsight:api': { audience: config.audience, ttl: config.ttl_s },
  'urn:nsight:api-short': { audience: config.audience, ttl: config.short_ttl_s },
  'urn:other:api': { audience: 'other-service', ttl: config.ttl_s },
};

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: { keys: [signingKey] },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    deviceFlow: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => 'urn:nsight:api',
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        const r = resources[indicator];
        if (!r) throw new Provider.errors.InvalidTarget(`unknown resource ${indicator}`);
        return {
          scope: 'api',
          audience: r.audience,
          accessTokenTTL: r.ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  scopes: ['openid', 'offline_access', 'api'],
  // Refresh tokens for every grant that may have one (device code, authorization code).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: {
    // The resource's lifetime (getResourceServerInfo) when the token is for one.
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? config.ttl_s,
    ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? config.ttl_s,
    DeviceCode: 600,
    RefreshToken: 3600,
    Grant: 3600,
    Interaction: 600,
    Session: 3600,
    IdToken: config.id_token_ttl_s ?? 600,
  },
  // Consent is granted for every requested scope and resource (a test provider).
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid offline_access api');
    for (const r of Object.keys(resources)) grant.addResourceScope(r, 'api');
    await grant.save();
    return grant;
  },
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));

const server = provider.listen(config.port, '127.0.0.1', () => {
  console.log(`listening ${config.issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
