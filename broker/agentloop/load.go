package agentloop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/awf-project/awf/proto"
	"golang.org/x/sys/unix"
)

// Bounds of the loop's inputs.
const (
	// MaxTaskBytes is the largest task the loop reads (the config's
	// maxTaskBytes is at most this).
	MaxTaskBytes = 65536
	// MaxModelRequestsLimit and MaxModelTokensLimit bound the config.
	MaxModelRequestsLimit = 64
	MaxModelTokensLimit   = 1 << 20
)

// Validate checks a configuration the loop can run with.
func (c *Config) Validate() error {
	if _, err := profileFor(c.Profile); err != nil {
		return err
	}
	if c.Model == "" || len(c.Model) > 200 || !printableASCII(c.Model) {
		return errors.New("model must be 1-200 printable ASCII characters")
	}
	if err := checkEndpoint(c.Endpoint); err != nil {
		return err
	}
	if c.Capability == "" || len(c.Capability) > 256 || !printableASCII(c.Capability) || strings.ContainsRune(c.Capability, ' ') {
		return errors.New("capability must be 1-256 printable ASCII characters without spaces")
	}
	if c.MaxModelRequests < 1 || c.MaxModelRequests > MaxModelRequestsLimit {
		return fmt.Errorf("maxModelRequests must be 1-%d", MaxModelRequestsLimit)
	}
	if c.MaxModelTokens < 1 || c.MaxModelTokens > MaxModelTokensLimit {
		return fmt.Errorf("maxModelTokens must be 1-%d", MaxModelTokensLimit)
	}
	if c.MaxOutputBytes < 1 || c.MaxOutputBytes > proto.MaxResultBytes {
		return fmt.Errorf("maxOutputBytes must be 1-%d", proto.MaxResultBytes)
	}
	if c.DeadlineUnixMilli <= 0 {
		return errors.New("deadlineUnixMilli must be positive")
	}
	if c.Profile == ProfileAnthropic && (c.AnthropicVersion == "" || len(c.AnthropicVersion) > 64 || !printableASCII(c.AnthropicVersion)) {
		return errors.New("anthropicVersion must be set (1-64 printable ASCII characters) for the anthropic profile")
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkEndpoint accepts an http or https base URL with a host, no user
// info, query or fragment, and no path beyond "/".
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
		return errors.New("endpoint must be an http(s) base URL with a host and nothing else")
	}
	return nil
}

// ParseConfig decodes loop.json strictly: proto's strict JSON, exactly the
// Config keys (anthropicVersion may be absent for openai), the right types,
// then Validate.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	v, err := proto.ParseJSON(b)
	if err != nil {
		return c, fmt.Errorf("loop config: %w", err)
	}
	if v.Kind() != proto.KindObject {
		return c, errors.New("loop config: not a JSON object")
	}
	strs := map[string]*string{"profile": &c.Profile, "model": &c.Model, "endpoint": &c.Endpoint,
		"capability": &c.Capability, "anthropicVersion": &c.AnthropicVersion}
	ints := map[string]*int64{"deadlineUnixMilli": &c.DeadlineUnixMilli}
	var req, tok, out int64
	ints["maxModelRequests"], ints["maxModelTokens"], ints["maxOutputBytes"] = &req, &tok, &out
	seen := map[string]bool{}
	for _, m := range v.Members() {
		seen[m.Key] = true
		if p, ok := strs[m.Key]; ok {
			if m.Value.Kind() != proto.KindString {
				return c, fmt.Errorf("loop config: %s must be a string", m.Key)
			}
			*p = m.Value.Str()
			continue
		}
		if p, ok := ints[m.Key]; ok {
			if m.Value.Kind() != proto.KindInteger {
				return c, fmt.Errorf("loop config: %s must be an integer", m.Key)
			}
			*p = m.Value.Int()
			continue
		}
		return c, fmt.Errorf("loop config: unknown key %q", clipString(m.Key, 64))
	}
	for k := range strs {
		if !seen[k] && k != "anthropicVersion" {
			return c, fmt.Errorf("loop config: %s is missing", k)
		}
	}
	for k := range ints {
		if !seen[k] {
			return c, fmt.Errorf("loop config: %s is missing", k)
		}
	}
	for _, x := range []int64{req, tok, out} {
		if x < 0 || x > 1<<31 {
			return c, errors.New("loop config: a bound is out of range")
		}
	}
	c.MaxModelRequests, c.MaxModelTokens, c.MaxOutputBytes = int(req), int(tok), int(out)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("loop config: %w", err)
	}
	return c, nil
}

// Paths are where Main finds its inputs and puts its outputs. Production
// uses DefaultPaths; tests point them into a temporary directory.
type Paths struct {
	Repo, Task, Schema, Config, Result, Transcript string
}

// DefaultPaths are the enclave paths of the contract.
func DefaultPaths() Paths {
	return Paths{Repo: RepoDir, Task: TaskPath, Schema: SchemaPath, Config: ConfigPath,
		Result: ResultPath, Transcript: TranscriptPath}
}

// Exit statuses of Main. Zero is the only one with a result; the others
// name the terminal state for the operator, and the broker trusts none of
// them (it parses result.json with the schema).
const (
	ExitOK          = 0
	ExitBadInput    = 10
	ExitNoResult    = 20 // any model-side terminal state; the transcript names it
	ExitOutputError = 30
)

// Main runs one invocation from files: it reads the config, task and
// schema, opens the seed, runs the loop and writes result.json only for a
// valid finish. The transcript is written as the loop goes, so a loop
// killed at its deadline still leaves what it did.
func Main(ctx context.Context, p Paths) int {
	tf, err := createOutput(p.Transcript)
	if err != nil {
		return ExitOutputError
	}
	defer tf.Close()
	tr := newTranscript(tf)
	bad := func(format string, args ...any) int {
		tr.end(Outcome{State: StateBadInput, Detail: fmt.Sprintf(format, args...)})
		return ExitBadInput
	}
	cb, err := readBounded(p.Config, 8192)
	if err != nil {
		return bad("read the config: %v", err)
	}
	cfg, err := ParseConfig(cb)
	if err != nil {
		return bad("%v", err)
	}
	task, err := readBounded(p.Task, MaxTaskBytes)
	if err != nil {
		return bad("read the task: %v", err)
	}
	if len(task) == 0 || !utf8.Valid(task) {
		return bad("the task is empty or not UTF-8")
	}
	sb, err := readBounded(p.Schema, proto.MaxJSONBytes)
	if err != nil {
		return bad("read the schema: %v", err)
	}
	schema, err := proto.ParseSchema(sb)
	if err != nil {
		return bad("%v", err)
	}
	repo, err := OpenRepo(p.Repo)
	if err != nil {
		return bad("%v", err)
	}
	defer repo.Close()
	out := Run(ctx, Options{Config: cfg, Task: string(task), Schema: schema, Repo: repo, Transcript: tf})
	switch out.State {
	case StateOK:
	case StateBadInput:
		return ExitBadInput
	default:
		return ExitNoResult
	}
	rf, err := createOutput(p.Result)
	if err != nil {
		return ExitOutputError
	}
	if _, err := rf.Write(out.Result); err != nil {
		rf.Close()
		return ExitOutputError
	}
	if err := rf.Close(); err != nil {
		return ExitOutputError
	}
	return ExitOK
}

// createOutput creates a new output file; it must not exist already and
// must not be reached through a symbolic link.
func createOutput(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
}

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
