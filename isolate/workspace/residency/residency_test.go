package residency

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bounds are the exact binomial tails, computed apart with integer
// arithmetic.
func TestAboveChance(t *testing.T) {
	for _, c := range []struct {
		n     int
		alpha float64
		want  int
	}{
		{64, Alpha, 45},
		{64, Alpha / 3, 46},
		{128, Alpha, 82},
		{128, Alpha / 3, 84},
		{192, Alpha, 118},
		{192, Alpha / 3, 120},
		{320, Alpha, 189},
		{1, 0.6, 1},
		{1, 0.4, 2},
	} {
		assert.Equal(t, c.want, AboveChance(c.n, c.alpha), "n %d alpha %g", c.n, c.alpha)
	}
	assert.Equal(t, AboveChance(Bits, Alpha)-1, ChanceMax, "ChanceMax is not the chance band of Bits at Alpha")
}

func TestControlPassed(t *testing.T) {
	for _, c := range []struct {
		correct, looks, tries int
		want                  bool
	}{
		{45, 1, 1, true},
		{44, 1, 1, false},
		{45, 1, 3, false}, // each look is tested at Alpha/3
		{46, 1, 3, true},
		{83, 2, 3, false},
		{84, 2, 3, true},
		{119, 3, 3, false},
		{120, 3, 3, true},
		{192, 3, 3, true},
	} {
		assert.Equal(t, c.want, ControlPassed(c.correct, c.looks, c.tries), "%+v", c)
	}
}

func TestSecretHasHalfTheBitsSet(t *testing.T) {
	for i := 0; i < 32; i++ {
		s, err := Secret()
		require.NoError(t, err)
		assert.Equal(t, Bits/2, bits.OnesCount64(s))
	}
}

func TestParse(t *testing.T) {
	m := uint64(0xff)
	for _, c := range []struct {
		name string
		in   string
		want Result
		err  string
	}{
		{"timing and mincore", `{"timing":"00000000000000ff","mincore":"00000000000000ff","ns":[-3,5]}`,
			Result{Timing: 0xff, Mincore: &m, Ns: []int64{-3, 5}}, ""},
		{"mincore refused", `{"timing":"1","mincore":null,"ns":[]}`, Result{Timing: 1, Ns: []int64{}}, ""},
		{"not json", `x`, Result{}, "receiver output"},
		{"bad timing", `{"timing":"zz"}`, Result{}, "receiver timing"},
		{"timing too wide", `{"timing":"1ffffffffffffffff"}`, Result{}, "receiver timing"},
		{"bad mincore", `{"timing":"0","mincore":"-1"}`, Result{}, "receiver mincore"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(c.in))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// FuzzParse checks that Parse never panics and that what it accepts reads
// back the same once written in the receiver's own format.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"timing":"00000000000000ff","mincore":null,"ns":[1,-2]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Parse(in)
		if err != nil {
			return
		}
		out := map[string]any{"timing": fmt.Sprintf("%016x", r.Timing), "mincore": nil, "ns": r.Ns}
		if r.Mincore != nil {
			out["mincore"] = fmt.Sprintf("%016x", *r.Mincore)
		}
		b, err := json.Marshal(out)
		require.NoError(t, err)
		back, err := Parse(b)
		require.NoError(t, err)
		assert.Equal(t, r, back)
	})
}
