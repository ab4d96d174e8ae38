package config

import _ "embed"

// Schema is the published JSON Schema of the configuration
// (docs/awf-config.schema.json is a copy kept identical by a test).
//
//go:embed schema.json
var Schema []byte
