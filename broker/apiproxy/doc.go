// Package apiproxy is the awf API proxy: the only process that holds a model
// provider's key. Callers (the primary agent, and one bounded-agent
// invocation at a time) reach it over plain HTTP on a local listener and
// authenticate with their own random capability; the proxy checks the
// request against that capability's limits, drops every client header,
// injects the real credential and forwards the body, unchanged, to the
// configured upstream over verified TLS.
//
// What it will not do:
//   - rewrite a request: a body naming another model, asking to stream, or
//     lacking or exceeding the token cap is refused, never corrected;
//   - forward anything but POST /v1/chat/completions (openai) and
//     POST /v1/messages (anthropic) to the one configured base URL;
//   - retry: a provider error goes back to the caller, and every forwarded
//     request is charged to the capability, never refunded;
//   - log a body or a header: its audit log holds metadata only;
//   - answer a limit with 429: exhaustion is a 403 with a typed body, so
//     SDKs do not retry into a cap that never recovers.
package apiproxy
