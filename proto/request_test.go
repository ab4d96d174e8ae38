package proto_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

func TestValidateRepoSlug(t *testing.T) {
	ok := []string{"a/b", "my-org/private-service", "A1/x.y_z-9", strings.Repeat("o", 39) + "/" + strings.Repeat("n", 100), "o/.x", "o/x.", "o-x/r", "0/0"}
	for _, s := range ok {
		assert.NoError(t, proto.ValidateRepoSlug(s), s)
	}
	bad := map[string]string{
		"":                              "empty",
		"owner":                         "must be owner/name",
		"a/b/c":                         "exactly one '/'",
		"/b":                            "owner is empty",
		"a/":                            "name is empty",
		"-a/b":                          "must start with an ASCII letter or digit",
		"a_b/c":                         "owner may contain only",
		"o-/r":                          "must not end with '-'",
		"o--x/r":                        `must not contain "--"`,
		"a.b/c":                         "owner may contain only",
		" o/r":                          "must start with",
		"o/r ":                          "name may contain only",
		strings.Repeat("o", 40) + "/r":  "owner is 40 characters",
		"o/" + strings.Repeat("n", 101): "name is 101 characters",
		"o/.":                           `must not be "."`,
		"o/..":                          `must not be ".."`,
		"o/a..b":                        `must not contain ".."`,
		"https://github.com/o/r":        "exactly one '/'",
		"o/r?x":                         "name may contain only",
		"o/r#x":                         "name may contain only",
		"o/*":                           "name may contain only",
		"o/r\n":                         "name may contain only",
		"ö/r":                           "must start with",
		strings.Repeat("o", 39) + "/" + strings.Repeat("n", 101): "141 bytes; the maximum is 140",
	}
	for s, want := range bad {
		err := proto.ValidateRepoSlug(s)
		require.Error(t, err, "%q", s)
		assert.ErrorIs(t, err, proto.ErrRequest)
		assert.Contains(t, err.Error(), want, "%q", s)
	}
}

func TestValidateScript(t *testing.T) {
	assert.NoError(t, proto.ValidateScript([]byte("print(1)\n")))
	assert.NoError(t, proto.ValidateScript([]byte(strings.Repeat("é", proto.MaxScriptBytes/2))))
	assert.ErrorContains(t, proto.ValidateScript(nil), "script is empty")
	assert.ErrorContains(t, proto.ValidateScript([]byte(strings.Repeat("a", proto.MaxScriptBytes+1))), "65537 bytes; the maximum is 65536")
	assert.ErrorContains(t, proto.ValidateScript([]byte("a\xffb")), "not valid UTF-8 (byte 1)")
	assert.ErrorIs(t, proto.ValidateScript(nil), proto.ErrRequest)
}

func TestSchemaHeader(t *testing.T) {
	text := []byte(`{"type":"enum","values":["a>b?","~~~"]}`)
	h := proto.EncodeSchemaHeader(text)
	assert.NotContains(t, h, "=")
	got, err := proto.DecodeSchemaHeader(h)
	require.NoError(t, err)
	assert.Equal(t, text, got)

	maxText := strings.Repeat("a", proto.MaxSchemaHeaderBytes)
	h = proto.EncodeSchemaHeader([]byte(maxText))
	require.Len(t, h, proto.MaxSchemaHeaderChars)
	_, err = proto.DecodeSchemaHeader(h)
	require.NoError(t, err)
	_, err = proto.DecodeSchemaHeader(h + "A")
	require.ErrorContains(t, err, "5467 characters; the maximum is 5466")

	for h, want := range map[string]string{
		"":                                       "empty",
		"eyJ0eXBlIj=":                            "outside the base64url alphabet",
		"ab+/":                                   "outside the base64url alphabet",
		"abcde":                                  "not canonical",
		"YR":                                     "not canonical", // non-zero trailing bits
		proto.EncodeSchemaHeader([]byte("\xff")): "not valid UTF-8",
	} {
		_, err := proto.DecodeSchemaHeader(h)
		require.Error(t, err, h)
		assert.ErrorIs(t, err, proto.ErrRequest)
		assert.Contains(t, err.Error(), want, h)
	}
}

func TestValidateRequest(t *testing.T) {
	h := proto.EncodeSchemaHeader([]byte(boolean))
	req, err := proto.ValidateRequest("o/r", h, []byte("print(1)"))
	require.NoError(t, err)
	assert.Equal(t, "o/r", req.Repo)
	assert.Equal(t, boolean, string(req.SchemaText))
	assert.Equal(t, int64(5), req.Schema.ChargeBits())

	_, err = proto.ValidateRequest("o/..", proto.EncodeSchemaHeader([]byte(`{"type":"bool"}`)), nil)
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `name must not be ".."`)
	assert.Contains(t, msg, `unknown schema type "bool"`)
	assert.Contains(t, msg, "script is empty")
	assert.ErrorIs(t, err, proto.ErrRequest)
	assert.ErrorIs(t, err, proto.ErrSchema)

	_, err = proto.ValidateRequest("o/r", "!", []byte("x"))
	require.ErrorContains(t, err, "base64url")
	assert.False(t, errors.Is(err, proto.ErrSchema))
}

func TestSensitivities(t *testing.T) {
	assert.Equal(t, []string{"public", "internal", "confidential", "sealed"}, proto.Sensitivities())
	for _, tc := range []struct {
		name        string
		bits        int64
		metered, ok bool
		boolOK      bool
		boolPerRun  int64
		constPerRun int64
	}{
		{"public", 0, false, true, true, -1, -1},
		{"internal", 64, true, true, true, 12, 16},
		{"confidential", 8, true, true, true, 1, 2},
		{"sealed", 0, true, true, false, 0, 0},
		{"Internal", 0, false, false, false, 0, 0},
	} {
		bits, metered, ok := proto.SensitivityBudget(tc.name)
		assert.Equal(t, []any{tc.bits, tc.metered, tc.ok}, []any{bits, metered, ok}, tc.name)
		afford, n := proto.Affordable(tc.name, 5)
		assert.Equal(t, tc.boolOK, afford, tc.name)
		assert.Equal(t, tc.boolPerRun, n, tc.name)
		_, n = proto.Affordable(tc.name, proto.MinChargeBits)
		assert.Equal(t, tc.constPerRun, n, tc.name)
	}
}

func TestLimitsAndBuckets(t *testing.T) {
	assert.Equal(t, 4099, proto.MaxSchemaHeaderBytes)
	assert.Equal(t, 1029, proto.MaxChargeBits)
	assert.Equal(t, 4, proto.MinChargeBits)
	b := proto.TimingBuckets()
	assert.Equal(t, []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second, time.Minute, 10 * time.Minute}, b)
	b[0] = 0
	assert.Equal(t, 10*time.Millisecond, proto.TimingBuckets()[0], "TimingBuckets must return a fresh slice")
	assert.Equal(t, time.Duration(proto.MaxQueryTimeoutSeconds)*time.Second+time.Duration(proto.FinalBucketMarginMS)*time.Millisecond, b[5])
}
