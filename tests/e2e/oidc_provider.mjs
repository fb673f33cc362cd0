// A real authorization server for the tests of wf as an OAuth resource server
// (test_oauth_resource_server.py): the pinned `oidc-provider` (npm, the
// certified OpenID Provider implementation) on 127.0.0.1, with
//
// - dynamic client registration open (RFC 7591),
// - RFC 8707 resource indicators on: access tokens for `--resource` are JWTs
//   (ES256) whose `aud` is that resource and whose scope is `mcp`,
// - users from `--users '{"alice": ["eng"], "bob": ["ops"]}'`: `sub` is the
//   name, `email` name@example.com, `groups` the list (in the access token),
// - login without a password: the interaction page takes `login_hint` from
//   the authorization request, or shows a form with one field (`login`);
//   consent is granted at once for what was asked. Everything else
//   (discovery, registration, PKCE, code and token issuance, signing) is the
//   provider's own code.
// - `--client ID:REDIRECT` pre-registers a public client (the console's);
//   `--client ID:SECRET@REDIRECT` a confidential one (client_secret_basic).
//   ID tokens carry the claims of the scopes granted (`groups`, `email`...),
//   as IdPs configured for it do (Keycloak's group mapper, Entra ID's
//   groups claim): `conformIdTokenClaims` off.
// - `--opaque ID:SECRET`: access tokens for the resource are opaque, and the
//   confidential client ID may introspect them (RFC 7662).
//
// Prints `ready <issuer>` on stdout once it listens.
import http from 'node:http';
import crypto from 'node:crypto';
import { parseArgs } from 'node:util';
import Provider, { errors } from 'oidc-provider';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    resource: { type: 'string' },
    users: { type: 'string', default: '{}' },
    client: { type: 'string', multiple: true, default: [] },
    ttl: { type: 'string', default: '300' },
    // Opaque access tokens for the resource, and an introspection client `ID:SECRET`.
    opaque: { type: 'string' },
  },
});
const port = Number(values.port);
const issuer = `http://127.0.0.1:${port}`;
const resource = values.resource;
const users = JSON.parse(values.users);

const key = (type, opts, alg) => {
  const { privateKey } = crypto.generateKeyPairSync(type, opts);
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, alg, use: 'sig', kid: `${alg}-${crypto.randomUUID()}` };
};

const account = (id) => ({
  accountId: id,
  claims: async () => ({
    sub: id,
    email: `${id}@example.com`,
    preferred_username: id,
    groups: users[id],
  }),
});

const provider = new Provider(issuer, {
  clients: [
    ...values.client.map((c) => {
      const i = c.indexOf(':');
      const rest = c.slice(i + 1);
      const at = rest.indexOf('@');
      const secret = at > 0 && !rest.startsWith('http') ? rest.slice(0, at) : null;
      return {
        client_id: c.slice(0, i),
        redirect_uris: [secret ? rest.slice(at + 1) : rest],
        ...(secret
          ? { client_secret: secret, token_endpoint_auth_method: 'client_secret_basic' }
          : { token_endpoint_auth_method: 'none' }),
        grant_types: ['authorization_code'],
        response_types: ['code'],
      };
    }),
    ...(values.opaque
      ? [
          {
            client_id: values.opaque.split(':')[0],
            client_secret: values.opaque.split(':')[1],
            redirect_uris: [],
            grant_types: [],
            response_types: [],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ]
      : []),
  ],
  jwks: {
    keys: [
      key('rsa', { modulusLength: 2048 }, 'RS256'),
      key('ec', { namedCurve: 'P-256' }, 'ES256'),
    ],
  },
  findAccount: async (_ctx, id) => (users[id] ? account(id) : undefined),
  claims: {
    openid: ['sub'],
    email: ['email'],
    profile: ['preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups', 'mcp'],
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  pkce: { required: () => true },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: Boolean(values.opaque), allowedPolicy: async () => true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== resource) throw new errors.InvalidTarget();
        return {
          scope: 'mcp',
          audience: resource,
          accessTokenTTL: Number(values.ttl),
          ...(values.opaque
            ? { accessTokenFormat: 'opaque' }
            : { accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256' } } }),
        };
      },
    },
  },
  extraTokenClaims: async (_ctx, token) => {
    const id = token.accountId;
    return users[id] ? { groups: users[id], email: `${id}@example.com`, preferred_username: id } : {};
  },
});

const form = (req) =>
  new Promise((resolve) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => resolve(new URLSearchParams(body)));
  });

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, uid } = details;
  if (prompt.name === 'login') {
    let user = params.login_hint;
    if (!user && req.method === 'POST') user = (await form(req)).get('login');
    if (!user) {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<!doctype html><title>Sign in</title><form method="post" action="/interaction/${uid}">` +
          `<label>User <input name="login" autofocus></label> <button type="submit">Sign in</button></form>`,
      );
      return;
    }
    if (!users[user]) {
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.end(`no such user: ${user}\n`);
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: user } }, { mergeWithLastSubmission: false });
    return;
  }
  // consent: grant what was asked.
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
  const d = prompt.details;
  if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  if (d.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((e) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`${e}\n`);
    });
    return;
  }
  callback(req, res);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
