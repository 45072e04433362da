(** L1 (proofs/exact-conversion.md) and L19 (proofs/gguf-exact-decode.md):
    finite binary16, bfloat16 and binary32 values are binary64 numbers
    (normal ones when nonzero), so the widening conversions are exact; and
    the GGUF Q8_0 / Q4_0 / Q4_1 decoding formulas of src/io/gguf.rs are exact
    in binary64 round-to-nearest.  Flocq's [binary_float p emax] is the IEEE
    format with precision p and largest exponent emax (emin = 3 - emax - p):
    binary16 = (11, 16), bfloat16 = (8, 128), binary32 = (24, 128). *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core IEEE754.Binary.
From Specbound Require Import Binary64.
Open Scope R_scope.

Definition binary16 := binary_float 11 16.
Definition bfloat16 := binary_float 8 128.
Definition binary32 := binary_float 24 128.

(** A number of FLT(emin, p) with p <= 53 and emin >= -1074 is in binary64. *)
Lemma FLT_into_F64 : forall emin p x, (0 < p <= 53)%Z -> (-1074 <= emin)%Z ->
  generic_format radix2 (FLT_exp emin p) x -> F64 x.
Proof.
  intros emin p x Hp He Fx.
  assert (I : Prec_gt_0 p) by (unfold Prec_gt_0; lia).
  destruct (FLT_format_generic radix2 emin p x Fx) as [[N e] Hx HN Hex].
  simpl in HN, Hex. rewrite Hx. unfold F2R; simpl.
  apply F64_int_pow2; [|lia].
  eapply Z.lt_le_trans; [exact HN|]. apply Z.pow_le_mono_r; lia.
Qed.

Lemma nonzero_normal : forall emin x, (-1022 <= emin)%Z ->
  bpow radix2 emin <= Rabs x -> bpow radix2 (-1022) <= Rabs x.
Proof. intros. eapply Rle_trans; [|eauto]. apply bpow_le; lia. Qed.

Theorem binary16_to_binary64 : forall x : binary16, is_finite 11 16 x = true ->
  F64 (B2R 11 16 x) /\ Rabs (B2R 11 16 x) < bpow radix2 16 /\
  (B2R 11 16 x <> 0 -> bpow radix2 (-1022) <= Rabs (B2R 11 16 x)).
Proof.
  intros x Fin. split; [|split].
  - apply (FLT_into_F64 (3 - 16 - 11) 11); [lia|lia|]. apply generic_format_B2R.
  - apply abs_B2R_lt_emax.
  - intros Nz. apply (nonzero_normal (3 - 16 - 11)); [lia|].
    apply abs_B2R_ge_emin. destruct x; simpl in *; auto; try (now elim Nz).
Qed.

Theorem bfloat16_to_binary64 : forall x : bfloat16, is_finite 8 128 x = true ->
  F64 (B2R 8 128 x) /\ Rabs (B2R 8 128 x) < bpow radix2 128 /\
  (B2R 8 128 x <> 0 -> bpow radix2 (-1022) <= Rabs (B2R 8 128 x)).
Proof.
  intros x Fin. split; [|split].
  - apply (FLT_into_F64 (3 - 128 - 8) 8); [lia|lia|]. apply generic_format_B2R.
  - apply abs_B2R_lt_emax.
  - intros Nz. apply (nonzero_normal (3 - 128 - 8)); [lia|].
    apply abs_B2R_ge_emin. destruct x; simpl in *; auto; try (now elim Nz).
Qed.

Theorem binary32_to_binary64 : forall x : binary32, is_finite 24 128 x = true ->
  F64 (B2R 24 128 x) /\ Rabs (B2R 24 128 x) < bpow radix2 128 /\
  (B2R 24 128 x <> 0 -> bpow radix2 (-1022) <= Rabs (B2R 24 128 x)).
Proof.
  intros x Fin. split; [|split].
  - apply (FLT_into_F64 (3 - 128 - 24) 24); [lia|lia|]. apply generic_format_B2R.
  - apply abs_B2R_lt_emax.
  - intros Nz. apply (nonzero_normal (3 - 128 - 24)); [lia|].
    apply abs_B2R_ge_emin. destruct x; simpl in *; auto; try (now elim Nz).
Qed.

Lemma shift24 : forall N e, (-24 <= e)%Z ->
  IZR (N * 2 ^ (e + 24)) * bpow radix2 (-24) = IZR N * bpow radix2 e.
Proof.
  intros. rewrite mult_IZR, Rmult_assoc. rewrite (IZR_Zpower radix2) by lia.
  rewrite <- bpow_plus. do 2 f_equal. lia.
Qed.

(** Every binary16 value is D * 2^-24 with an integer |D| < 2^40. *)
Lemma binary16_grid : forall x : binary16,
  exists D : Z, B2R 11 16 x = IZR D * bpow radix2 (-24) /\ IZR (Z.abs D) < bpow radix2 40.
Proof.
  intros x. assert (I : Prec_gt_0 11) by (unfold Prec_gt_0; lia).
  destruct (FLT_format_generic radix2 (3 - 16 - 11) 11 _ (generic_format_B2R 11 16 x))
    as [[N e] Hx HN Hex]. simpl in HN, Hex.
  exists (N * 2 ^ (e + 24))%Z. split.
  - rewrite Hx. unfold F2R; simpl. now rewrite shift24.
  - pose proof (abs_B2R_lt_emax 11 16 x) as B.
    assert (E : B2R 11 16 x = IZR (N * 2 ^ (e + 24)) * bpow radix2 (-24)).
    { rewrite Hx. unfold F2R; simpl. now rewrite shift24. }
    rewrite E, Rabs_mult, Rabs_Zabs, (Rabs_pos_eq (bpow _ _)) in B by apply bpow_ge_0.
    apply Rmult_lt_reg_r with (bpow radix2 (-24)); [apply bpow_gt_0|].
    rewrite <- bpow_plus. exact B.
Qed.

(** Q8_0: d * q, d a binary16 scale, q a signed byte. *)
Theorem gguf_q8_0_exact : forall (d : binary16) (q : Z), (-128 <= q <= 127)%Z ->
  rnd (B2R 11 16 d * IZR q) = B2R 11 16 d * IZR q.
Proof.
  intros d q Hq. apply rnd_exact.
  destruct (binary16_grid d) as (D & Hd & HD). rewrite Hd.
  replace (IZR D * bpow radix2 (-24) * IZR q) with (IZR (D * q) * bpow radix2 (-24))
    by (rewrite mult_IZR; ring).
  apply F64_int_pow2; [|lia].
  apply lt_IZR. rewrite Z.abs_mul, mult_IZR.
  apply Rle_lt_trans with (bpow radix2 40 * 128).
  - apply Rmult_le_compat.
    + apply IZR_le; lia.
    + apply IZR_le; lia.
    + lra.
    + apply IZR_le; lia.
  - change (bpow radix2 40) with (IZR (Z.pow_pos 2 40)). rewrite <- mult_IZR.
    apply IZR_lt. reflexivity.
Qed.

(** Q4_0: d * (q - 8), q a nibble; the subtraction q - 8 is exact too. *)
Theorem gguf_q4_0_exact : forall (d : binary16) (q : Z), (0 <= q <= 15)%Z ->
  rnd (B2R 11 16 d * rnd (IZR q - 8)) = B2R 11 16 d * (IZR q - 8).
Proof.
  intros d q Hq.
  assert (E : rnd (IZR q - 8) = IZR q - 8).
  { apply rnd_exact. replace (IZR q - 8) with (IZR (q - 8) * bpow radix2 0)
      by (rewrite minus_IZR; simpl; ring).
    apply F64_int_pow2; [|lia]. apply Z.abs_lt. simpl. lia. }
  rewrite E. replace (IZR q - 8) with (IZR (q - 8)) by (rewrite minus_IZR; ring).
  apply gguf_q8_0_exact. lia.
Qed.

(** Q4_1: d * q + m, q a nibble, d and m binary16; both operations exact. *)
Theorem gguf_q4_1_exact : forall (d m : binary16) (q : Z), (0 <= q <= 15)%Z ->
  rnd (rnd (B2R 11 16 d * IZR q) + B2R 11 16 m) = B2R 11 16 d * IZR q + B2R 11 16 m.
Proof.
  intros d m q Hq. rewrite gguf_q8_0_exact by lia. apply rnd_exact.
  destruct (binary16_grid d) as (D & Hd & HD). destruct (binary16_grid m) as (M & Hm & HM).
  rewrite Hd, Hm.
  replace (IZR D * bpow radix2 (-24) * IZR q + IZR M * bpow radix2 (-24))
    with (IZR (D * q + M) * bpow radix2 (-24)) by (rewrite plus_IZR, mult_IZR; ring).
  apply F64_int_pow2; [|lia].
  apply lt_IZR. apply Rle_lt_trans with (IZR (Z.abs D) * 15 + IZR (Z.abs M)).
  - replace (IZR (Z.abs D) * 15 + IZR (Z.abs M)) with (IZR (Z.abs D * 15 + Z.abs M))
      by (rewrite plus_IZR, mult_IZR; reflexivity).
    apply IZR_le. pose proof (Z.abs_triangle (D * q) M). rewrite Z.abs_mul in H.
    rewrite (Z.abs_eq q) in H by lia. nia.
  - apply Rlt_le_trans with (bpow radix2 40 * 15 + bpow radix2 40); [|].
    + pose proof (IZR_le _ _ (Z.abs_nonneg D)). lra.
    + replace (bpow radix2 40 * 15 + bpow radix2 40) with (bpow radix2 40 * 16) by ring.
      change (bpow radix2 40) with (IZR (Z.pow_pos 2 40)). rewrite <- mult_IZR.
      apply IZR_le. vm_compute. congruence.
Qed.
