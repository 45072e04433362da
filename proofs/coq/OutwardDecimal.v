(** L21 (proofs/outward-decimal.md): decimal floor/ceiling at position p
    enclose a binary64 interval, and mid +- rad forms with a radius rounded
    up at any decimal position enclose it too.  Pure real arithmetic: the
    code evaluates these with exact rationals (rug/GMP). *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core.
Open Scope R_scope.

Definition radix10 : radix := Build_radix 10 eq_refl.

Definition dec_floor (x : R) (p : Z) : R :=
  IZR (Zfloor (x / bpow radix10 p)) * bpow radix10 p.
Definition dec_ceil (x : R) (p : Z) : R :=
  IZR (Zceil (x / bpow radix10 p)) * bpow radix10 p.

Lemma dec_floor_le : forall x p, dec_floor x p <= x.
Proof.
  intros x p. unfold dec_floor. pose proof (bpow_gt_0 radix10 p).
  pose proof (Zfloor_lb (x / bpow radix10 p)).
  apply Rmult_le_compat_r with (r := bpow radix10 p) in H0; [|lra].
  unfold Rdiv in H0. rewrite Rmult_assoc, Rinv_l, Rmult_1_r in H0 by lra. exact H0.
Qed.

Lemma dec_ceil_ge : forall x p, x <= dec_ceil x p.
Proof.
  intros x p. unfold dec_ceil. pose proof (bpow_gt_0 radix10 p).
  pose proof (Zceil_ub (x / bpow radix10 p)).
  apply Rmult_le_compat_r with (r := bpow radix10 p) in H0; [|lra].
  unfold Rdiv in H0. rewrite Rmult_assoc, Rinv_l, Rmult_1_r in H0 by lra. exact H0.
Qed.

(** Items 1 and 3: [floor_p a, ceil_p b] contains [a, b], hence x. *)
Theorem outward_decimal : forall a b x p, a <= x <= b ->
  dec_floor a p <= x <= dec_ceil b p.
Proof.
  intros a b x p [H1 H2]. pose proof (dec_floor_le a p). pose proof (dec_ceil_ge b p). lra.
Qed.

(** Item 2: mid +- rad with rad = ceil_p(max(m - a, b - m)). *)
Theorem mid_rad_encloses : forall a b x m p, a <= x <= b ->
  let r := dec_ceil (Rmax (m - a) (b - m)) p in
  m - r <= x <= m + r.
Proof.
  intros a b x m p [H1 H2] r.
  pose proof (dec_ceil_ge (Rmax (m - a) (b - m)) p).
  pose proof (Rmax_l (m - a) (b - m)). pose proof (Rmax_r (m - a) (b - m)).
  unfold r. lra.
Qed.
