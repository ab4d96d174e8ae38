package staging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testRunID  = "0123456789abcdef0123456789abcdef"
	testCommit = "89abcdef0123456789abcdef0123456789abcdef"
)

func testSeeds() []Seed {
	return []Seed{
		{Repo: "acme/one", SeedID: SeedID(testRunID, "acme/one"), Commit: testCommit, Sensitivity: "internal"},
		{Repo: "acme/two", SeedID: SeedID(testRunID, "acme/two"), Commit: strings.Repeat("1", 64), Sensitivity: "sealed"},
	}
}

func TestSeedIDMatchesTheHMACDefinition(t *testing.T) {
	// HMAC-SHA256(key=runId, msg=lowercase(trim(repo))).hex[0:32], computed
	// independently with Python's hmac module.
	assert.Equal(t, "42b2c5287ac957eba37196f3c3f69bc3", SeedID(testRunID, "acme/one"))
	assert.Equal(t, "42b2c5287ac957eba37196f3c3f69bc3", SeedID(testRunID, "  ACME/One "))
	assert.NotEqual(t, SeedID(testRunID, "acme/one"), SeedID(strings.Repeat("f", 32), "acme/one"))
}

func TestSeedMapRoundTrip(t *testing.T) {
	p := filepath.Join(newPrivateRoot(t), SeedMapName)
	require.NoError(t, WriteSeedMap(p, testRunID, testSeeds()))
	st, err := os.Lstat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":2,"runId":"`+testRunID+`","seeds":[`+
		`{"repo":"acme/one","seedId":"`+SeedID(testRunID, "acme/one")+`","sensitivity":"internal","commit":"`+testCommit+`"},`+
		`{"repo":"acme/two","seedId":"`+SeedID(testRunID, "acme/two")+`","sensitivity":"sealed","commit":"`+strings.Repeat("1", 64)+`"}]}`, string(b))
	m, err := ReadSeedMap(p)
	require.NoError(t, err)
	assert.Equal(t, NewSeedMap(testRunID, testSeeds()), m)

	// O_EXCL: never overwritten.
	require.Error(t, WriteSeedMap(p, testRunID, testSeeds()))
}

func TestSeedMapFileChecks(t *testing.T) {
	root := newPrivateRoot(t)
	good := filepath.Join(root, "good.json")
	require.NoError(t, WriteSeedMap(good, testRunID, testSeeds()))

	// Never written through a symlink.
	link := filepath.Join(root, "link.json")
	target := filepath.Join(root, "target.json")
	require.NoError(t, os.Symlink(target, link))
	require.Error(t, WriteSeedMap(link, testRunID, testSeeds()))
	_, err := os.Lstat(target)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// Never read through a symlink, nor when open to others.
	require.NoError(t, os.Symlink(good, filepath.Join(root, "l2.json")))
	_, err = ReadSeedMap(filepath.Join(root, "l2.json"))
	require.Error(t, err)
	require.NoError(t, os.Chmod(good, 0o644))
	_, err = ReadSeedMap(good)
	require.Error(t, err)
	require.NoError(t, os.Chmod(good, 0o600))
	require.NoError(t, os.Chown(good, 65534, 65534))
	_, err = ReadSeedMap(good)
	require.Error(t, err)

	// Invalid seeds are never written.
	bad := testSeeds()
	bad[1].SeedID = bad[0].SeedID
	require.Error(t, WriteSeedMap(filepath.Join(root, "bad.json"), testRunID, bad))
	_, err = os.Lstat(filepath.Join(root, "bad.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseSeedMapRejects(t *testing.T) {
	valid, err := json.Marshal(NewSeedMap(testRunID, testSeeds()))
	require.NoError(t, err)
	_, err = ParseSeedMap(valid)
	require.NoError(t, err)
	s := string(valid)
	one := `{"repo":"acme/one","seedId":"` + SeedID(testRunID, "acme/one") + `","sensitivity":"internal","commit":"` + testCommit + `"}`
	wrap := func(seeds string) string {
		return `{"version":2,"runId":"` + testRunID + `","seeds":[` + seeds + `]}`
	}
	for _, tc := range []struct{ name, doc string }{
		{"empty", ``},
		{"not an object", `[]`},
		{"version 1", strings.Replace(s, `"version":2`, `"version":1`, 1)},
		{"version string", strings.Replace(s, `"version":2`, `"version":"2"`, 1)},
		{"short run id", strings.Replace(s, testRunID, "0123", -1)},
		{"upper-case run id", strings.Replace(s, testRunID, strings.ToUpper(testRunID), -1)},
		{"no seeds", wrap(``)},
		{"seed id mismatch", wrap(strings.Replace(one, `"acme/one"`, `"acme/other"`, 1))},
		{"upper-case repo", wrap(strings.Replace(one, `"acme/one"`, `"Acme/one"`, 1))},
		{"unknown sensitivity", wrap(strings.Replace(one, `"internal"`, `"secret"`, 1))},
		{"short commit", wrap(strings.Replace(one, testCommit, testCommit[:39], 1))},
		{"missing commit", wrap(strings.Replace(one, `,"commit":"`+testCommit+`"`, ``, 1))},
		{"duplicate repo", wrap(one + "," + one)},
		{"unknown field", wrap(strings.Replace(one, `{"repo"`, `{"extra":1,"repo"`, 1))},
		{"duplicate key", wrap(strings.Replace(one, `{"repo":"acme/one"`, `{"repo":"acme/x","repo":"acme/one"`, 1))},
		{"duplicate top-level key", `{"version":2,"version":2,"runId":"` + testRunID + `","seeds":[` + one + `]}`},
		{"trailing data", s + `{}`},
		{"trailing garbage", s + `x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSeedMap([]byte(tc.doc))
			require.Error(t, err)
		})
	}
}

// FuzzParseSeedMap checks that whatever ParseSeedMap accepts is valid and
// survives a write/parse round trip unchanged.
func FuzzParseSeedMap(f *testing.F) {
	valid, _ := json.Marshal(NewSeedMap(testRunID, testSeeds()))
	f.Add(valid)
	f.Add([]byte(`{"version":2,"runId":"","seeds":[]}`))
	f.Add([]byte(`{"version":2,"version":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseSeedMap(b)
		if err != nil {
			return
		}
		require.NoError(t, m.Validate())
		again, err := json.Marshal(m)
		require.NoError(t, err)
		m2, err := ParseSeedMap(again)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}
