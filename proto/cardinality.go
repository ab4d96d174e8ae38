package proto

import (
	"math"
	"math/big"
	"math/bits"
)

// Cardinality returns the exact number of distinct values the schema admits
// (R26), or nil when that number exceeds 2^MaxExactCardinalityBits and is
// deliberately not materialised (see CardinalityLog2). The caller owns the
// returned value.
func (s *Schema) Cardinality() *big.Int {
	if s.card == nil {
		return nil
	}
	return new(big.Int).Set(s.card)
}

// CardinalityLog2 returns log2 of the cardinality as a float64 (exact for
// powers of two, otherwise rounded). It is defined for every schema.
func (s *Schema) CardinalityLog2() float64 { return s.log2 }

// ChargeBits is 1 + ceil(log2(cardinality)) + 3 (R27), where the cardinality
// is capped at 2^1024+1 as the reference caps it, so the charge is at most
// MaxChargeBits (1029) and at least MinChargeBits (4).
func (s *Schema) ChargeBits() int64 { return s.charge }

// ChargeCapped reports whether the cardinality exceeds 2^CardinalityCapBits,
// so that ChargeBits returned the cap rather than the exact charge.
func (s *Schema) ChargeCapped() bool { return s.charge == MaxChargeBits }

// ChargeForCardinality returns 1 + ceil(log2(card)) + 3 with card capped at
// 2^CardinalityCapBits+1. card must be at least 1.
func ChargeForCardinality(card *big.Int) int64 {
	if saturated(card) {
		return MaxChargeBits
	}
	return chargeFor(card)
}

// CeilLog2 returns ceil(log2(n)) for n ≥ 1 (0 for n ≤ 1): the bit length of n-1.
func CeilLog2(n *big.Int) int64 {
	if n.Cmp(big.NewInt(1)) <= 0 {
		return 0
	}
	return int64(new(big.Int).Sub(n, big.NewInt(1)).BitLen())
}

func chargeFor(capped *big.Int) int64 {
	return ResultStatusBits + CeilLog2(capped) + TimingBucketBits
}

// capLimit is 2^CardinalityCapBits; anything above it saturates to capLimit+1.
func capLimit() *big.Int { return new(big.Int).Lsh(big.NewInt(1), CardinalityCapBits) }

// saturated reports whether x is above 2^CardinalityCapBits.
func saturated(x *big.Int) bool {
	return x.BitLen() > CardinalityCapBits+1 || (x.BitLen() == CardinalityCapBits+1 && x.Cmp(capLimit()) > 0)
}

func capCard(x *big.Int) *big.Int {
	if saturated(x) {
		return x.Add(capLimit(), big.NewInt(1))
	}
	return x
}

// leafCount returns the cardinality of a leaf node (const, boolean, enum or
// integer), the one owner of the leaf rule for every form below.
func leafCount(n *node) uint64 {
	switch n.kind {
	case kindConst:
		return 1
	case kindBoolean:
		return 2
	case kindEnum:
		return uint64(len(n.values))
	}
	// integer: max-min+1 fits in 55 bits because both are safe integers, and
	// is positive because the schema builder rejects maximum < minimum.
	return uint64(n.max - n.min + 1)
}

// leafCardinality returns the cardinality of a leaf node as a big.Int.
func leafCardinality(n *node) *big.Int { return new(big.Int).SetUint64(leafCount(n)) }

// cappedCardinality computes min(cardinality, 2^1024+1) without ever
// building a number much larger than 2^2048.
func cappedCardinality(n *node) *big.Int {
	switch n.kind {
	case kindObject, kindTuple:
		acc := big.NewInt(1)
		for _, k := range n.kids {
			acc = capCard(acc.Mul(acc, cappedCardinality(k)))
		}
		return acc
	case kindUnion:
		acc := big.NewInt(0)
		for _, k := range n.kids {
			acc = capCard(acc.Add(acc, cappedCardinality(k)))
		}
		return acc
	case kindArray:
		base := cappedCardinality(n.kids[0])
		acc := big.NewInt(1)
		for i := 0; i < n.length; i++ {
			acc = capCard(acc.Mul(acc, base))
			if saturated(acc) {
				break
			}
		}
		return acc
	}
	return leafCardinality(n)
}

// bitBound is an upper bound on the bit length of the cardinality, saturated
// well above MaxExactCardinalityBits so that it never overflows.
func bitBound(n *node) int64 {
	const sat = 1 << 40
	switch n.kind {
	case kindObject, kindTuple:
		var sum int64
		for _, k := range n.kids {
			sum += bitBound(k)
			if sum > sat {
				return sat
			}
		}
		return sum
	case kindUnion:
		var hi int64
		for _, k := range n.kids {
			hi = max(hi, bitBound(k))
		}
		return min(hi+int64(big.NewInt(int64(len(n.kids))).BitLen()), sat)
	case kindArray:
		if n.length == 0 {
			return 1
		}
		return min(bitBound(n.kids[0])*int64(n.length), sat)
	}
	return int64(bits.Len64(leafCount(n)))
}

// exactCardinality returns the exact cardinality, or nil when its bit length
// might exceed MaxExactCardinalityBits.
func exactCardinality(n *node) *big.Int {
	switch b := bitBound(n); {
	case b <= 63:
		return new(big.Int).SetUint64(exactSmall(n))
	case b > MaxExactCardinalityBits:
		return nil
	}
	return exact(n)
}

// exactSmall computes a cardinality whose bit bound is at most 63.
func exactSmall(n *node) uint64 {
	switch n.kind {
	case kindObject, kindTuple:
		acc := uint64(1)
		for _, k := range n.kids {
			acc *= exactSmall(k)
		}
		return acc
	case kindUnion:
		var acc uint64
		for _, k := range n.kids {
			acc += exactSmall(k)
		}
		return acc
	case kindArray:
		base, acc := exactSmall(n.kids[0]), uint64(1)
		for i := 0; i < n.length; i++ {
			acc *= base
		}
		return acc
	}
	return leafCount(n)
}

func exact(n *node) *big.Int {
	if bitBound(n) <= 63 {
		return new(big.Int).SetUint64(exactSmall(n))
	}
	switch n.kind {
	case kindObject, kindTuple:
		acc := big.NewInt(1)
		for _, k := range n.kids {
			acc.Mul(acc, exact(k))
		}
		return acc
	case kindUnion:
		acc := big.NewInt(0)
		for _, k := range n.kids {
			acc.Add(acc, exact(k))
		}
		return acc
	case kindArray:
		return new(big.Int).Exp(exact(n.kids[0]), big.NewInt(int64(n.length)), nil)
	}
	return leafCardinality(n)
}

// cardinalityLog2 computes log2 of the cardinality in floating point.
func cardinalityLog2(n *node) float64 {
	switch n.kind {
	case kindObject, kindTuple:
		var sum float64
		for _, k := range n.kids {
			sum += cardinalityLog2(k)
		}
		return sum
	case kindUnion:
		logs := make([]float64, len(n.kids))
		hi := math.Inf(-1)
		for i, k := range n.kids {
			logs[i] = cardinalityLog2(k)
			hi = math.Max(hi, logs[i])
		}
		var sum float64
		for _, l := range logs {
			sum += math.Exp2(l - hi)
		}
		return hi + math.Log2(sum)
	case kindArray:
		return float64(n.length) * cardinalityLog2(n.kids[0])
	}
	switch n.kind {
	case kindConst:
		return 0
	case kindBoolean:
		return 1
	case kindEnum:
		return math.Log2(float64(len(n.values)))
	}
	return math.Log2(float64(n.max-n.min) + 1)
}
