package agentloop

import (
	"sort"
	"strconv"
	"strings"

	"github.com/awf-project/awf/proto"
)

// args is one tool call's arguments: a strict JSON object (proto.ParseJSON:
// valid UTF-8, no duplicate keys, integers only, bounded size and depth).
type args struct {
	obj proto.Value
}

// toolArgs decodes a call's arguments. Errors become tool results.
func toolArgs(c toolCall) (args, error) {
	if c.bad != "" {
		return args{}, toolErr("bad arguments: %s", c.bad)
	}
	if len(c.args) > maxArgumentBytes {
		return args{}, toolErr("bad arguments: %d bytes; the maximum is %d", len(c.args), maxArgumentBytes)
	}
	v, err := proto.ParseJSON(c.args)
	if err != nil {
		return args{}, toolErr("bad arguments: %v", err)
	}
	if v.Kind() != proto.KindObject {
		return args{}, toolErr("bad arguments: a JSON object is required, not %s", v.Kind())
	}
	return args{obj: v}, nil
}

// pick returns the values of the named keys ("name?" is optional; an
// absent optional key gives the zero Value) and refuses any other key.
func (a args) pick(keys ...string) ([]proto.Value, error) {
	out := make([]proto.Value, len(keys))
	found := make([]bool, len(keys))
	for _, m := range a.obj.Members() {
		known := false
		for i, k := range keys {
			if strings.TrimSuffix(k, "?") == m.Key {
				out[i], found[i], known = m.Value, true, true
			}
		}
		if !known {
			names := make([]string, len(keys))
			for i, k := range keys {
				names[i] = strings.TrimSuffix(k, "?")
			}
			sort.Strings(names)
			return nil, toolErr("bad arguments: unknown argument %s; the arguments are %s",
				strconv.Quote(clipString(m.Key, 64)), strings.Join(names, ", "))
		}
	}
	for i, k := range keys {
		if !found[i] && !strings.HasSuffix(k, "?") {
			return nil, toolErr("bad arguments: %s is required", k)
		}
	}
	return out, nil
}

// only returns the values of exactly the keys given, all required.
func (a args) only(keys ...string) ([]proto.Value, error) { return a.pick(keys...) }

// strings returns string arguments; an absent optional one is "".
func (a args) strings(keys ...string) ([]string, error) {
	vs, err := a.pick(keys...)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		if v.Kind() == 0 {
			continue
		}
		if v.Kind() != proto.KindString {
			return nil, toolErr("bad arguments: %s must be a string, not %s", strings.TrimSuffix(keys[i], "?"), v.Kind())
		}
		out[i] = v.Str()
	}
	return out, nil
}
