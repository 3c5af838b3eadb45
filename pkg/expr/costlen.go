package expr

import "github.com/expr-lang/expr/ast"

// sizeFunc returns, for an expression of the payload's length alone built
// of numbers, len(payload) and + - * / (such as len(payload) / 1024), the
// function that computes it from the length, so that such a cost is
// computed without running the expression machine; ok is false for any
// other expression. The function gives what the expression gives, as a
// float64.
func sizeFunc(n ast.Node) (f func(size float64) float64, ok bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		v := float64(n.Value)
		return func(float64) float64 { return v }, true
	case *ast.FloatNode:
		v := n.Value
		return func(float64) float64 { return v }, true
	case *ast.BuiltinNode:
		if n.Name != "len" || len(n.Arguments) != 1 {
			return nil, false
		}
		if id, isID := n.Arguments[0].(*ast.IdentifierNode); isID && id.Value == "payload" {
			return func(size float64) float64 { return size }, true
		}
	case *ast.BinaryNode:
		l, okL := sizeFunc(n.Left)
		r, okR := sizeFunc(n.Right)
		if !okL || !okR {
			return nil, false
		}
		switch n.Operator {
		case "+":
			return func(s float64) float64 { return l(s) + r(s) }, true
		case "-":
			return func(s float64) float64 { return l(s) - r(s) }, true
		case "*":
			return func(s float64) float64 { return l(s) * r(s) }, true
		case "/":
			return func(s float64) float64 { return l(s) / r(s) }, true
		}
	}
	return nil, false
}
