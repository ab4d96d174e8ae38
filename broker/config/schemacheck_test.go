package config

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strings"
)

// schemaChecker is a small JSON Schema (2020-12) subset validator: exactly the
// keywords schema.json uses. It refuses any keyword it does not know, so the
// schema cannot silently grow a rule that this check ignores.
type schemaChecker struct {
	root map[string]any
}

var annotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true, "default": true, "$defs": true}

func (c *schemaChecker) check(s map[string]any, v any, path string) error {
	for k, kw := range s {
		if annotations[k] {
			continue
		}
		var err error
		switch k {
		case "type":
			if !hasType(v, kw.(string)) {
				err = fmt.Errorf("%s: not of type %s", path, kw)
			}
		case "enum":
			found := false
			for _, e := range kw.([]any) {
				if jsonEqual(e, v) {
					found = true
				}
			}
			if !found {
				err = fmt.Errorf("%s: not in enum", path)
			}
		case "const":
			if !jsonEqual(kw, v) {
				err = fmt.Errorf("%s: not const", path)
			}
		case "pattern":
			if str, ok := v.(string); ok && !regexp.MustCompile(kw.(string)).MatchString(str) {
				err = fmt.Errorf("%s: does not match %s", path, kw)
			}
		case "minimum", "maximum":
			if n, ok := v.(json.Number); ok {
				x, _ := new(big.Rat).SetString(string(n))
				b, _ := new(big.Rat).SetString(string(kw.(json.Number)))
				if (k == "minimum" && x.Cmp(b) < 0) || (k == "maximum" && x.Cmp(b) > 0) {
					err = fmt.Errorf("%s: %s %s violated", path, k, kw)
				}
			}
		case "minItems":
			if a, ok := v.([]any); ok {
				n, _ := kw.(json.Number).Int64()
				if int64(len(a)) < n {
					err = fmt.Errorf("%s: fewer than %d items", path, n)
				}
			}
		case "required":
			if m, ok := v.(map[string]any); ok {
				for _, r := range kw.([]any) {
					if _, ok := m[r.(string)]; !ok {
						err = fmt.Errorf("%s: missing %s", path, r)
					}
				}
			}
		case "properties":
			if m, ok := v.(map[string]any); ok {
				for pk, ps := range kw.(map[string]any) {
					if pv, ok := m[pk]; ok {
						if e := c.check(ps.(map[string]any), pv, path+"."+pk); e != nil {
							err = e
						}
					}
				}
			}
		case "additionalProperties":
			if kw != false {
				panic("additionalProperties other than false is not supported")
			}
			if m, ok := v.(map[string]any); ok {
				props, _ := s["properties"].(map[string]any)
				for mk := range m {
					if _, ok := props[mk]; !ok {
						err = fmt.Errorf("%s: additional property %s", path, mk)
					}
				}
			}
		case "items":
			if a, ok := v.([]any); ok {
				for i, e := range a {
					if e2 := c.check(kw.(map[string]any), e, fmt.Sprintf("%s[%d]", path, i)); e2 != nil {
						err = e2
					}
				}
			}
		case "oneOf":
			n := 0
			for _, sub := range kw.([]any) {
				if c.check(sub.(map[string]any), v, path) == nil {
					n++
				}
			}
			if n != 1 {
				err = fmt.Errorf("%s: matches %d of oneOf", path, n)
			}
		case "anyOf":
			n := 0
			for _, sub := range kw.([]any) {
				if c.check(sub.(map[string]any), v, path) == nil {
					n++
				}
			}
			if n == 0 {
				err = fmt.Errorf("%s: matches none of anyOf", path)
			}
		case "not":
			if c.check(kw.(map[string]any), v, path) == nil {
				err = fmt.Errorf("%s: matches a forbidden schema", path)
			}
		case "allOf":
			for _, sub := range kw.([]any) {
				if e := c.check(sub.(map[string]any), v, path); e != nil {
					err = e
				}
			}
		case "$ref":
			ref := kw.(string)
			name, ok := strings.CutPrefix(ref, "#/$defs/")
			if !ok {
				panic("unsupported $ref " + ref)
			}
			err = c.check(c.root["$defs"].(map[string]any)[name].(map[string]any), v, path)
		case "if":
			if c.check(kw.(map[string]any), v, path) == nil {
				if then, ok := s["then"]; ok {
					err = c.check(then.(map[string]any), v, path)
				}
			}
		case "then":
			// handled with "if"
		case "x-awf-uniqueSlugs":
			if a, ok := v.([]any); ok {
				seen := map[string]bool{}
				for _, e := range a {
					var slug string
					switch t := e.(type) {
					case string:
						slug = t
					case map[string]any:
						slug, _ = t["repo"].(string)
					}
					key := strings.ToLower(slug)
					if seen[key] {
						err = fmt.Errorf("%s: duplicate slug %s", path, slug)
					}
					seen[key] = true
				}
			}
		default:
			panic("schema keyword not supported by the test checker: " + k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(string(n))
		return ok && r.IsInt()
	}
	panic("unsupported type " + t)
}

func jsonEqual(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		x, _ := new(big.Rat).SetString(string(an))
		y, _ := new(big.Rat).SetString(string(bn))
		return x != nil && y != nil && x.Cmp(y) == 0
	}
	return reflect.DeepEqual(a, b)
}
