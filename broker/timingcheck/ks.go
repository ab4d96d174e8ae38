package timingcheck

import (
	"math"
	"sort"
)

// KS is a two-sample Kolmogorov–Smirnov test: D is the largest distance
// between the two empirical distribution functions, P the asymptotic
// probability of a D at least this large when both samples come from one
// distribution, and Critical the D above which the test rejects at the
// report's alpha (the smallest difference these sample sizes can see).
type KS struct {
	D        float64 `json:"d"`
	P        float64 `json:"p"`
	Critical float64 `json:"critical"`
}

// KSTest compares a and b at significance alpha. Ties are handled by
// stepping both distribution functions past every copy of a value before
// measuring the distance.
func KSTest(a, b []float64, alpha float64) KS {
	if len(a) == 0 || len(b) == 0 {
		return KS{P: 1, Critical: 1}
	}
	x := append([]float64(nil), a...)
	y := append([]float64(nil), b...)
	sort.Float64s(x)
	sort.Float64s(y)
	n, m := float64(len(x)), float64(len(y))
	var i, j int
	d := 0.0
	for i < len(x) && j < len(y) {
		v := math.Min(x[i], y[j])
		for i < len(x) && x[i] == v {
			i++
		}
		for j < len(y) && y[j] == v {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/n-float64(j)/m))
	}
	en := math.Sqrt(n * m / (n + m))
	// Stephens' correction, applied alike to P and to Critical so that
	// D > Critical exactly when P < alpha (to the series' first term).
	scale := en + 0.12 + 0.11/en
	return KS{
		D:        d,
		P:        kolmogorovQ(scale * d),
		Critical: math.Sqrt(-math.Log(alpha/2)/2) / scale,
	}
}

// kolmogorovQ is the Kolmogorov distribution's survival function,
// 2 Σ (-1)^(k-1) exp(-2 k² λ²), with Stephens' small-sample correction
// applied by the caller.
func kolmogorovQ(lambda float64) float64 {
	if lambda < 0.2 {
		return 1 // the series converges slowly here; the value is 1 to 1e-9
	}
	sum, sign := 0.0, 1.0
	for k := 1; k <= 100; k++ {
		term := sign * 2 * math.Exp(-2*float64(k*k)*lambda*lambda)
		sum += term
		if math.Abs(term) < 1e-12 {
			break
		}
		sign = -sign
	}
	return math.Min(1, math.Max(0, sum))
}
