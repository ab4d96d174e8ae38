package config

import (
	"bytes"
	_ "embed"
)

//go:embed schema.json
var schemaJSON []byte

// Schema returns the published JSON Schema of the configuration
// (docs/awf-config.schema.json is a copy kept identical by a test). A fresh
// copy each call, so that no importer can change it for the others.
func Schema() []byte { return bytes.Clone(schemaJSON) }
