(** L2 (proofs/power-of-two-scaling.md), one scaling step by 2^k, in the
    overflow-free model (an overflow gives +-inf, which fails the round-trip
    check and the finiteness check of the code; that part is paper).
    (a) exact iff representable; (b) the round-trip check proves exactness,
    for either sign of k, underflow included; (d) the unscaling of an
    enclosure as rounding::scale_pow2_rd / scale_pow2_ru compute it. *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core Mult_error.
From Specbound Require Import Binary64 RnDirectedScalar.
Open Scope R_scope.

Theorem scale_exact_iff : forall a k,
  rnd (a * bpow radix2 k) = a * bpow radix2 k <-> F64 (a * bpow radix2 k).
Proof.
  intros a k. split.
  - intros H. rewrite <- H. apply F64_rnd.
  - apply rnd_exact.
Qed.

Lemma scale_up_exact : forall x k, F64 x -> (0 <= k)%Z -> F64 (x * bpow radix2 k).
Proof. intros. now apply mult_bpow_pos_exact_FLT. Qed.

Theorem scale_round_trip : forall a k, F64 a ->
  rnd (rnd (a * bpow radix2 k) * bpow radix2 (- k)) = a ->
  rnd (a * bpow radix2 k) = a * bpow radix2 k.
Proof.
  intros a k Fa H.
  destruct (Z_le_gt_dec 0 k) as [Hk|Hk].
  - apply rnd_exact, scale_up_exact; auto.
  - set (b := rnd (a * bpow radix2 k)) in *.
    rewrite rnd_exact in H by (apply scale_up_exact; [apply F64_rnd|lia]).
    rewrite <- H, Rmult_assoc, <- bpow_plus. replace (- k + k)%Z with 0%Z by lia.
    simpl. ring.
Qed.

(** scale_pow2_rd / scale_pow2_ru of src/linalg/rounding.rs for one step. *)
Definition scale_rd (x : R) (k : Z) : R :=
  let y := rnd (x * bpow radix2 k) in
  if Req_EM_T (rnd (y * bpow radix2 (- k))) x then y else pred radix2 fexp64 y.
Definition scale_ru (x : R) (k : Z) : R :=
  let y := rnd (x * bpow radix2 k) in
  if Req_EM_T (rnd (y * bpow radix2 (- k))) x then y else succ radix2 fexp64 y.

Theorem scale_rd_le : forall x k, F64 x -> scale_rd x k <= x * bpow radix2 k.
Proof.
  intros x k Fx. unfold scale_rd. destruct Req_EM_T as [E|E].
  - right. now apply scale_round_trip.
  - apply rn_directed_one_op.
Qed.

Theorem scale_ru_ge : forall x k, F64 x -> x * bpow radix2 k <= scale_ru x k.
Proof.
  intros x k Fx. unfold scale_ru. destruct Req_EM_T as [E|E].
  - right. symmetry. now apply scale_round_trip.
  - apply rn_directed_one_op.
Qed.

(** (d): if sigma(A_s) = 2^k sigma(A) lies in [l, h] (binary64 ends), the
    unscaled ends enclose sigma(A).  The identity sigma_i(2^k A) =
    2^k sigma_i(A) (part (c)) is the elementary fact that 2^k > 0 scales
    A^T A by 2^(2k); it is not formalised here. *)
Theorem unscale_sound : forall l h s k, F64 l -> F64 h ->
  l <= s * bpow radix2 k <= h ->
  scale_rd l (- k) <= s <= scale_ru h (- k).
Proof.
  intros l h s k Fl Fh [H1 H2].
  assert (P : 0 < bpow radix2 (- k)) by apply bpow_gt_0.
  assert (E : s = s * bpow radix2 k * bpow radix2 (- k)).
  { rewrite Rmult_assoc, <- bpow_plus. replace (k + - k)%Z with 0%Z by lia. simpl; ring. }
  split.
  - eapply Rle_trans; [apply scale_rd_le; auto|]. rewrite E at 1.
    apply Rmult_le_compat_r; lra.
  - eapply Rle_trans; [|apply scale_ru_ge; auto]. rewrite E at 1.
    apply Rmult_le_compat_r; lra.
Qed.
