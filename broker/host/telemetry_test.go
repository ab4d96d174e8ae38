package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/sbx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loggedTelemetry returns the one telemetry line Prepare logged to progress.
func loggedTelemetry(t *testing.T, progress string) broker.Telemetry {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(progress, "\n") {
		if rest, ok := strings.CutPrefix(l, "awf: telemetry: "); ok {
			lines = append(lines, rest)
		}
	}
	require.Len(t, lines, 1, progress)
	dec := json.NewDecoder(strings.NewReader(lines[0]))
	dec.DisallowUnknownFields()
	var r broker.Telemetry
	require.NoError(t, dec.Decode(&r), lines[0])
	return r
}

func TestRuntimeStateBlockedOnlyForASecurityBlock(t *testing.T) {
	rt, err := sbx.New(isolate.HostConfig{RunID: "t", StateDir: t.TempDir()})
	require.NoError(t, err)
	perr := rt.Probe(context.Background())
	require.Error(t, perr)
	state, cat := runtimeState(fmt.Errorf("runtime sbx: %w", perr))
	assert.Equal(t, [2]string{broker.StateBlocked, "query-security-block"}, [2]string{state, cat})
	state, cat = runtimeState(errors.New("runsc: not found"))
	assert.Equal(t, [2]string{broker.StateUnavailable, "query-runtime-unavailable"}, [2]string{state, cat})
}

func TestPreflightTelemetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		primary string
		err     error
		want    broker.Telemetry
	}{
		{"blocked runtime", "", fmt.Errorf("preflight: %w", runtimeUnavailable{fmt.Errorf("probe: %w", sbx.ErrBlocked)}),
			broker.Telemetry{PrimaryBackend: "host", QueryBackend: "sbx", LifecycleClass: "preflight", CapabilityState: "blocked", Category: "query-security-block"}},
		{"absent runtime", PrimaryExternal, fmt.Errorf("preflight: %w", runtimeUnavailable{errors.New("runsc missing")}),
			broker.Telemetry{PrimaryBackend: "external", QueryBackend: "sbx", LifecycleClass: "preflight", CapabilityState: "unavailable", Category: "query-runtime-unavailable"}},
		{"other preflight check", "", errors.New("preflight: /home/x holds a credential"),
			broker.Telemetry{PrimaryBackend: "host", QueryBackend: "sbx", LifecycleClass: "preflight", CapabilityState: "unavailable", Category: "preflight-failed"}},
		{"staging", "", errors.New("staging: o/r: clone failed"),
			broker.Telemetry{PrimaryBackend: "host", QueryBackend: "sbx", LifecycleClass: "startup", CapabilityState: "unavailable", Category: "prepare-failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var progress bytes.Buffer
			preflightTelemetry(Options{Progress: &progress, PrimaryBackend: tc.primary}, "sbx", nil, tc.err)
			got := loggedTelemetry(t, progress.String())
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, progress.String(), "/home/x", "no free text reaches the record")
		})
	}
	t.Run("passed", func(t *testing.T) {
		var progress bytes.Buffer
		l := NewLayout("r1", t.TempDir(), t.TempDir(), t.TempDir())
		preflightTelemetry(Options{Progress: &progress}, "direct", &Run{Layout: l}, nil)
		assert.Empty(t, progress.String())
		b, err := os.ReadFile(filepath.Join(l.AuditDir, "runtime-telemetry.jsonl"))
		require.NoError(t, err)
		assert.Equal(t, `{"primaryBackend":"host","queryBackend":"direct","lifecycleClass":"preflight","capabilityState":"supported","category":"ready"}`+"\n", string(b))
	})
}

// TestPrepareLogsARuntimePreflightFailure runs the real Prepare against a
// docker runtime whose socket is absent: it fails before anything is made,
// and the operator's log carries the preflight record.
func TestPrepareLogsARuntimePreflightFailure(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "Prepare runs as root")
	dir := t.TempDir()
	cli := filepath.Join(dir, "bounded-query")
	require.NoError(t, os.WriteFile(cli, []byte("#!/bin/sh\n"), 0o755))
	cfg, err := config.Load([]byte(`{"agent":{"user":"nobody"},"boundedQueries":{"enabled":true,"runtime":"docker",` +
		`"dockerSocket":"` + filepath.Join(dir, "absent.sock") + `","privateRepos":[{"repo":"o/r","sensitivity":"internal","source":"` + dir + `"}]}}`))
	require.NoError(t, err)
	var progress bytes.Buffer
	priv := filepath.Join(dir, "private")
	r, err := Prepare(context.Background(), Options{Config: cfg, Getenv: func(string) string { return "" }, Progress: &progress,
		CLIBinary: cli, Workdir: t.TempDir(), PrivateBase: priv, IngressBase: filepath.Join(dir, "ingress"), AuditArchive: filepath.Join(dir, "archive")})
	require.Error(t, err)
	assert.Nil(t, r)
	assert.Equal(t, broker.Telemetry{PrimaryBackend: "host", QueryBackend: "docker", LifecycleClass: "preflight",
		CapabilityState: "unavailable", Category: "query-runtime-unavailable"}, loggedTelemetry(t, progress.String()))
	_, serr := os.Stat(priv)
	assert.True(t, os.IsNotExist(serr), "nothing was made")
}

func TestPrimaryBackendIsTheSpecs(t *testing.T) {
	assert.Equal(t, PrimaryHost, primaryBackend(Spec{}), "awf run's agent is a host process")
	assert.Equal(t, PrimaryExternal, primaryBackend(Spec{PrimaryBackend: PrimaryExternal}))
}
