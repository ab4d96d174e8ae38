package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/awf-project/awf/broker/client"
)

// Format is the syntax of a configuration document.
type Format int

// The two syntaxes of a configuration. Both load through the same loader.
const (
	FormatJSON Format = iota + 1
	FormatYAML
)

func (f Format) String() string {
	if f == FormatYAML {
		return "YAML"
	}
	return "JSON"
}

// DetectFormat says how to read a document named name: a ".json" file is
// JSON and a ".yaml" or ".yml" file is YAML, whatever they hold, so that a
// file is never read as the other syntax by accident. Anything else,
// standard input ("-") included, is JSON if its first byte that is not
// white space is "{" (every configuration is an object) and YAML otherwise.
func DetectFormat(name string, src []byte) Format {
	if name != "-" {
		switch strings.ToLower(filepath.Ext(name)) {
		case ".json":
			return FormatJSON
		case ".yaml", ".yml":
			return FormatYAML
		}
	}
	if t := bytes.TrimLeft(src, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return FormatJSON
	}
	return FormatYAML
}

// LoadSource parses and checks a document read from name (as DetectFormat
// reads names). A YAML error names the file, as NAME:LINE:COLUMN.
func LoadSource(name string, src []byte) (*Config, error) {
	if DetectFormat(name, src) == FormatJSON {
		return Load(src)
	}
	c, err := LoadYAML(src)
	var ye *YAMLError
	if errors.As(err, &ye) {
		ye.Name = DisplayName(name)
	}
	return c, err
}

// DisplayName is how errors name a --config source: "<stdin>" for "-".
func DisplayName(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}

// ReadSource reads the configuration that --config names: the file at path,
// or standard input for "-". Standard input must not be a terminal (awf
// would wait for a document nobody is typing), and at most MaxConfigBytes
// are read from either.
func ReadSource(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path == "-" {
		if f, ok := stdin.(interface{ Fd() uintptr }); ok && client.IsTerminal(int(f.Fd())) {
			return nil, errors.New("config: --config - reads the configuration from standard input, which is a terminal; pipe or redirect it instead (--config - < awf.yaml)")
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		defer f.Close()
		r = f
	}
	src, err := io.ReadAll(io.LimitReader(r, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	if len(src) > MaxConfigBytes {
		return nil, fmt.Errorf("config: %s is larger than %d bytes", path, MaxConfigBytes)
	}
	return src, nil
}

// LoadPath reads and loads the configuration that --config names, JSON or
// YAML, from a file or from standard input ("-").
func LoadPath(path string, stdin io.Reader) (*Config, error) {
	src, err := ReadSource(path, stdin)
	if err != nil {
		return nil, err
	}
	return LoadSource(path, src)
}
