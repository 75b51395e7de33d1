// Package credentials hands out OTA credentials' API tokens, read where the
// connections config says they live (config.Credential.Ref):
//
//   - "secretsmanager:<secret id>": the SecretString of a Secrets Manager
//     secret, read at first use and kept in memory for a TTL. Nothing holds
//     the token but this process: not the function's environment, not the
//     template, not a log line.
//   - anything else: the environment variable of that name (token_env, for
//     local runs and tests).
//
// Begin with New(secretsManagerClient) and call Cache.Token. A rotated secret
// takes effect without a deploy: at the latest when the cached copy's TTL
// ends, and at once when the push path calls Invalidate after the OTA refused
// the token (401/403).
package credentials
