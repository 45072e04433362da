(** L12 (proofs/compensated-sum.md): the error-free transformations of
    src/linalg/eft.rs and the computable form of the Sum2 bound.
    TwoSum and Fast2Sum are Flocq's Pff2Flocq theorems (Boldo-Melquiond,
    valid with underflow), instantiated to binary64 with ties-to-even. *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core Mult_error Plus_error Relative Pff.Pff2Flocq.
From Specbound Require Import Binary64 DotProductError.
Open Scope R_scope.

(** eft::two_sum: s = a + b; bp = s - a; e = (a - (s - bp)) + (b - bp). *)
Definition two_sum_s (a b : R) : R := rnd (a + b).
Definition two_sum_e (a b : R) : R :=
  let s := rnd (a + b) in let bp := rnd (s - a) in
  rnd (rnd (a - rnd (s - bp)) + rnd (b - bp)).

Theorem two_sum_exact : forall a b, F64 a -> F64 b ->
  two_sum_s a b + two_sum_e a b = a + b /\
  Rabs (two_sum_e a b) <= u * Rabs (two_sum_s a b).
Proof.
  intros a b Fa Fb.
  assert (E : two_sum_s a b + two_sum_e a b = a + b).
  { unfold two_sum_s, two_sum_e.
    apply (TwoSum_correct emin64 prec64 (fun t => negb (Z.even t))).
    - unfold prec64; lia.
    - unfold emin64; lia.
    - apply choiceE_sym.
    - exact Fa.
    - exact Fb. }
  split; auto.
  destruct (FLT_plus_error_N_round_ex radix2 emin64 prec64 (fun t => negb (Z.even t)) a b Fa Fb)
    as (d & Hd & Hr).
  replace (two_sum_e a b) with (a + b - two_sum_s a b) by lra.
  unfold two_sum_s. rewrite Hr at 1.
  replace (rnd (a + b) * (1 + d) - rnd (a + b)) with (d * rnd (a + b)) by ring.
  rewrite Rabs_mult. apply Rmult_le_compat_r; [apply Rabs_pos|].
  eapply Rle_trans; [exact Hd|]. right.
  unfold u_ro, u, prec64. rewrite <- bpow_m1. f_equal.
Qed.

(** Fast2Sum (|b| <= |a|): not used by the code; Flocq's theorem. *)
Theorem fast_two_sum_exact : forall a b, F64 a -> F64 b -> Rabs b <= Rabs a ->
  rnd (a + b) + rnd (b + rnd (a - rnd (a + b))) = a + b.
Proof.
  intros a b Fa Fb H.
  apply (Fast2Sum_correct emin64 prec64 (fun t => negb (Z.even t))); auto.
  - unfold prec64; lia.
  - unfold emin64; lia.
  - apply choiceE_sym.
Qed.

(** eft::Sum2::add_prod: h = a * b; l = a.mul_add(b, -h).
    Exact when |a b| >= 2^-969 = 2^(emin + 2 prec - 1) (or a b = 0). *)
Theorem two_product_fma_exact : forall a b, F64 a -> F64 b ->
  (a * b <> 0 -> bpow radix2 (-969) <= Rabs (a * b)) ->
  rnd (a * b + - rnd (a * b)) = a * b - rnd (a * b).
Proof.
  intros a b Fa Fb H.
  assert (F : F64 (rnd (a * b) - a * b)).
  { apply mult_error_FLT; auto with typeclass_instances. }
  apply generic_format_opp in F.
  replace (a * b + - rnd (a * b)) with (- (rnd (a * b) - a * b)) by ring.
  rewrite rnd_exact by exact F. ring.
Qed.

(** Otherwise the pair misses a b by at most eta/2 (covered by the code's
    (N+1) eta term). *)
Theorem two_product_fma_underflow : forall a b,
  Rabs (a * b) < bpow radix2 (-969) ->
  Rabs (a * b - (rnd (a * b) + rnd (a * b + - rnd (a * b)))) <= eta / 2.
Proof.
  intros a b H.
  set (z := a * b + - rnd (a * b)).
  assert (Z : Rabs z < bpow radix2 (emin64 + prec64)).
  { unfold z. pose proof (abs_err_le (a * b)) as E.
    replace (a * b + - rnd (a * b)) with (- (rnd (a * b) - a * b)) by ring.
    rewrite Rabs_Ropp.
    assert (Hu : u * Rabs (a * b) <= u * bpow radix2 (-969)).
    { apply Rmult_le_compat_l; [pose proof u_pos; lra|lra]. }
    unfold u, eta in *. rewrite <- bpow_plus in Hu. simpl (-53 + -969)%Z in Hu.
    assert (bpow radix2 (-1022) + bpow radix2 (-1074) / 2 < bpow radix2 (-1074 + 53)).
    { simpl (-1074 + 53)%Z.
      replace (bpow radix2 (-1021)) with (2 * bpow radix2 (-1022))
        by (replace (-1021)%Z with (1 + -1022)%Z by lia; rewrite bpow_plus; reflexivity).
      assert (bpow radix2 (-1074) < bpow radix2 (-1022)) by (apply bpow_lt; lia).
      pose proof (bpow_gt_0 radix2 (-1074)). lra. }
    change (emin64 + prec64)%Z with (-1074 + 53)%Z. lra. }
  pose proof (error_le_half_ulp radix2 fexp64 (fun t => negb (Z.even t)) z) as E.
  rewrite ulp_FLT_small in E by (auto with typeclass_instances).
  replace (a * b - (rnd (a * b) + rnd z)) with (- (rnd z - z)) by (unfold z; ring).
  rewrite Rabs_Ropp. change (bpow radix2 emin64) with eta in E. lra.
Qed.

(** (d)/(f): from |res - s| <= u|s| + G0 (ORO05 Prop. 4.5, cited, with
    G0 = gamma_{N-1}^2 Sigma), with Sigma <= SigBar, gamma_{N-1} <= g,
    and a total s' that differs from s by at most K eta/2 (the TwoProduct
    residuals, K <= N), the code's bound err = u(|res| + Gc)/(1 - 2u) + Gc,
    Gc = g^2 SigBar + (N+1) eta, encloses s'. *)
Theorem sum2_computable_bound : forall res s s' Sig SigBar g0 g (N K : nat),
  0 <= Sig <= SigBar -> 0 <= g0 <= g -> (K <= N)%nat ->
  Rabs (res - s) <= u * Rabs s + g0 ^ 2 * Sig ->
  Rabs (s' - s) <= INR K * (eta / 2) ->
  let Gc := g ^ 2 * SigBar + INR (N + 1) * eta in
  Rabs (res - s') <= u * (Rabs res + Gc) / (1 - 2 * u) + Gc.
Proof.
  intros res s s' Sig SigBar g0 g N K HS Hg HK H1 H2 Gc.
  pose proof u_pos. pose proof u_small. pose proof eta_pos.
  set (G0 := g0 ^ 2 * Sig) in *.
  assert (HG0 : 0 <= G0 <= g ^ 2 * SigBar).
  { unfold G0. split; [apply Rmult_le_pos; [apply pow_le|]; lra|].
    apply Rmult_le_compat; try lra; [apply pow_le; lra|]. apply pow_incr. lra. }
  assert (HK' : INR K <= INR (N + 1)) by (apply le_INR; lia).
  pose proof (pos_INR K).
  assert (HGc : G0 + INR K * (eta / 2) <= Gc) by (unfold Gc; nra).
  assert (HK0 : 0 <= INR K * (eta / 2)) by nra.
  (* |res - s| (1 - u) <= u |res| + G0 *)
  assert (Hs : Rabs s <= Rabs res + Rabs (res - s)).
  { replace s with (res - (res - s)) at 1 by ring.
    eapply Rle_trans; [apply Rabs_triang|]. rewrite Rabs_Ropp. lra. }
  set (E := Rabs (res - s)) in *.
  assert (HE : E * (1 - u) <= u * Rabs res + G0) by nra.
  assert (HE2 : E <= u * (Rabs res + G0) / (1 - u) + G0).
  { apply Rle_trans with ((u * Rabs res + G0) / (1 - u)).
    - apply Rmult_le_reg_r with (1 - u); [lra|]. unfold Rdiv.
      rewrite Rmult_assoc, Rinv_l, Rmult_1_r by lra. exact HE.
    - right. field. lra. }
  assert (Hfin : u * (Rabs res + G0) / (1 - u) <= u * (Rabs res + Gc) / (1 - 2 * u)).
  { pose proof (Rabs_pos res). unfold Rdiv. apply Rmult_le_compat.
    - nra.
    - apply Rlt_le, Rinv_0_lt_compat. lra.
    - apply Rmult_le_compat_l; lra.
    - apply Rinv_le_contravar; lra. }
  replace (res - s') with ((res - s) - (s' - s)) by ring.
  eapply Rle_trans; [apply Rabs_triang|]. rewrite Rabs_Ropp. fold E. lra.
Qed.
