package broker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLedgerSequences(t *testing.T) {
	const constBits, boolBits = 4, 5
	l := NewLedger(map[string]string{"o/conf": "confidential", "o/int": "internal", "o/seal": "sealed", "o/pub": "public", "o/odd": "weird"})

	// confidential (8 bits): exactly two const queries, or one boolean.
	assert.True(t, l.TryDebit("o/conf", constBits))
	assert.True(t, l.TryDebit("O/CONF", constBits))
	assert.False(t, l.TryDebit("o/conf", constBits))
	l2 := NewLedger(map[string]string{"o/c": "confidential"})
	assert.True(t, l2.TryDebit("o/c", boolBits))
	assert.False(t, l2.TryDebit("o/c", boolBits))
	assert.False(t, l2.TryDebit("o/c", constBits), "3 bits left cannot fund a const")

	// internal (64 bits): twelve booleans, then one const, then nothing.
	for i := 0; i < 12; i++ {
		assert.True(t, l.TryDebit("o/int", boolBits), "boolean %d", i+1)
	}
	assert.False(t, l.TryDebit("o/int", boolBits))
	assert.True(t, l.TryDebit("o/int", constBits))
	assert.False(t, l.TryDebit("o/int", constBits))
	assert.Equal(t, int64(0), l.Balance("o/int"))

	// A denied large charge leaves the balance for a later smaller one.
	l3 := NewLedger(map[string]string{"o/i": "internal"})
	assert.False(t, l3.TryDebit("o/i", 65))
	assert.Equal(t, int64(64), l3.Balance("o/i"))
	assert.True(t, l3.TryDebit("o/i", 64))

	// sealed: none. public: any number, never debited. unknown: none.
	assert.False(t, l.TryDebit("o/seal", constBits))
	for i := 0; i < 1000; i++ {
		assert.True(t, l.TryDebit("o/pub", 1029))
	}
	assert.Equal(t, int64(-1), l.Balance("o/pub"))
	assert.False(t, l.TryDebit("o/none", constBits))
	assert.False(t, l.TryDebit("o/odd", constBits), "an unknown sensitivity funds nothing")
	assert.False(t, l.TryDebit("o/pub", -1))
}
